//! The labels of a function's metrics (feature `metrics`).

use crate::classify::give_up::GiveUp;

/// The label sets of one function's metrics, built in `const` context from its name, so
/// that recording a metric allocates nothing, recorder or not.
#[derive(Debug)]
pub(crate) struct MetricLabels {
    pub(crate) function: [metrics::Label; 1],
    pub(crate) ok: [metrics::Label; 2],
    pub(crate) error: [metrics::Label; 2],
    pub(crate) abandoned: [metrics::Label; 2],
    pub(crate) reasons: [[metrics::Label; 2]; GiveUp::COUNT],
    pub(crate) to_open: [metrics::Label; 2],
    pub(crate) to_closed: [metrics::Label; 2],
    pub(crate) to_half_open: [metrics::Label; 2],
}

impl MetricLabels {
    /// The labels of the function `name`.
    pub(crate) const fn new(name: &'static str) -> Self {
        use metrics::Label;
        const fn pair(name: &'static str, key: &'static str, value: &'static str) -> [Label; 2] {
            [
                Label::from_static_parts("function", name),
                Label::from_static_parts(key, value),
            ]
        }
        let reasons = [
            pair(name, "reason", GiveUp::LABELS[0]),
            pair(name, "reason", GiveUp::LABELS[1]),
            pair(name, "reason", GiveUp::LABELS[2]),
            pair(name, "reason", GiveUp::LABELS[3]),
            pair(name, "reason", GiveUp::LABELS[4]),
            pair(name, "reason", GiveUp::LABELS[5]),
            pair(name, "reason", GiveUp::LABELS[6]),
            pair(name, "reason", GiveUp::LABELS[7]),
            pair(name, "reason", GiveUp::LABELS[8]),
            pair(name, "reason", GiveUp::LABELS[9]),
            pair(name, "reason", GiveUp::LABELS[10]),
        ];
        Self {
            function: [Label::from_static_parts("function", name)],
            ok: pair(name, "outcome", "ok"),
            error: pair(name, "outcome", "error"),
            abandoned: pair(name, "outcome", "abandoned"),
            reasons,
            to_open: pair(name, "to", "open"),
            to_closed: pair(name, "to", "closed"),
            to_half_open: pair(name, "to", "half_open"),
        }
    }
}

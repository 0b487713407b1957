//! The load on the dependency over time, one small panel per strategy on a shared scale,
//! as SVG.

use std::error::Error;
use std::path::Path;

use plotters::prelude::*;

use crate::sim::Report;

/// One strategy's run.
pub struct Panel<'a> {
    pub title: &'a str,
    pub report: &'a Report,
}

const ATTEMPTS: RGBColor = RGBColor(31, 100, 180);
const SERVED: RGBColor = RGBColor(40, 150, 60);
const CAPACITY: RGBColor = RGBColor(90, 90, 90);
const OUTAGE: RGBColor = RGBColor(250, 215, 215);
const COLUMNS: usize = 3;

/// Draws `panels` to `path`, under `caption`, with a key in the first free cell.
pub fn draw(path: &Path, caption: &str, panels: &[Panel<'_>]) -> Result<(), Box<dyn Error>> {
    let rows = (panels.len() + 1).div_ceil(COLUMNS);
    let root = SVGBackend::new(path, (1500, 80 + 300 * rows as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, body) = root.split_vertically(60);
    top.draw(&Text::new(
        format!("Load on the dependency: {caption}"),
        (20, 22),
        ("sans-serif", 20).into_font(),
    ))?;
    let cells = body.split_evenly((rows, COLUMNS));
    let Some(first) = panels.first() else {
        return Ok(());
    };
    let world = first.report.world;
    let end = panels
        .iter()
        .map(|p| p.report.last_end.as_secs_f64().ceil())
        .fold(world.timeline.end() as f64, f64::max);
    let top_of_scale = panels
        .iter()
        .map(|p| f64::from(p.report.peak()))
        .chain(world.capacity.map(f64::from))
        .fold(1.0, f64::max)
        * 1.08;
    let outage = (
        world.timeline.warmup as f64,
        world.timeline.recovery() as f64,
    );
    for (cell, panel) in cells.iter().zip(panels) {
        let report = panel.report;
        let mut chart = ChartBuilder::on(cell)
            .caption(
                format!(
                    "{}: {:.2}x in outage, peak {}/s, {:.1}% ok",
                    panel.title,
                    report.amplification(),
                    report.outage_peak(),
                    100.0 * report.outage_success_rate()
                ),
                ("sans-serif", 17),
            )
            .margin(10)
            .margin_right(24)
            .x_label_area_size(38)
            .y_label_area_size(62)
            .build_cartesian_2d(0.0..end, 0.0..top_of_scale)?;
        // The shading first, so that the grid shows through it.
        chart.draw_series([Rectangle::new(
            [(outage.0, 0.0), (outage.1, top_of_scale)],
            OUTAGE.filled(),
        )])?;
        chart
            .configure_mesh()
            .x_desc("time (s)")
            .y_desc("requests / s")
            .x_labels(8)
            .y_labels(6)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .light_line_style(TRANSPARENT)
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 14))
            .draw()?;
        if let Some(capacity) = world.capacity {
            let capacity = f64::from(capacity);
            chart.draw_series(DashedLineSeries::new(
                [(0.0, capacity), (end, capacity)],
                6,
                4,
                CAPACITY.stroke_width(1),
            ))?;
        }
        let second = |i: usize| i as f64 + 0.5;
        chart.draw_series(LineSeries::new(
            report
                .seconds
                .iter()
                .enumerate()
                .map(|(i, s)| (second(i), f64::from(s.served))),
            SERVED.stroke_width(2),
        ))?;
        chart.draw_series(LineSeries::new(
            report
                .seconds
                .iter()
                .enumerate()
                .map(|(i, s)| (second(i), f64::from(s.load()))),
            ATTEMPTS.stroke_width(2),
        ))?;
    }
    if let Some(cell) = cells.get(panels.len()) {
        key(cell, world.capacity.is_some())?;
    }
    root.present()?;
    Ok(())
}

/// What the lines and the shading mean.
fn key(
    cell: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    capacity: bool,
) -> Result<(), Box<dyn Error>> {
    let font = ("sans-serif", 16).into_font();
    let (x, mut y) = (60, 60);
    cell.draw(&Text::new(
        "key",
        (x, y - 30),
        ("sans-serif", 18).into_font(),
    ))?;
    let line = |label: &str, style: ShapeStyle, y: i32| -> Result<(), Box<dyn Error>> {
        cell.draw(&PathElement::new([(x, y), (x + 40, y)], style))?;
        cell.draw(&Text::new(label.to_owned(), (x + 52, y - 8), font.clone()))?;
        Ok(())
    };
    line(
        "attempts reaching the dependency, per second",
        ATTEMPTS.stroke_width(3),
        y,
    )?;
    y += 32;
    line("attempts it served, per second", SERVED.stroke_width(3), y)?;
    y += 32;
    if capacity {
        line(
            "its capacity (the rest get a 503)",
            CAPACITY.stroke_width(1),
            y,
        )?;
        y += 32;
    }
    cell.draw(&Rectangle::new(
        [(x, y - 10), (x + 40, y + 10)],
        OUTAGE.filled(),
    ))?;
    cell.draw(&Text::new(
        "the outage: every request fails",
        (x + 52, y - 8),
        font.clone(),
    ))?;
    y += 44;
    for note in [
        "Every panel has the same scale.",
        "x in outage: attempts during the outage",
        "per call started in it; ok: calls that",
        "succeeded in the end.",
    ] {
        cell.draw(&Text::new(note, (x, y), font.clone()))?;
        y += 24;
    }
    Ok(())
}

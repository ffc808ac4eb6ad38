//! Figures as data, rendered to SVG and PNG with plotters.
//!
//! A [`Figure`] is a title, two [`Axis`] values (label, unit, scale, range) and a
//! list of [`Series`]; [`Figure::to_svg`] and [`Figure::to_png`] draw it. Every
//! figure has axis labels with units and a legend naming its series, so a figure
//! read on its own (in a paper, a screenshot) says what it shows.
//!
//! Text is laid out and (in PNG) drawn with DejaVu Sans, compiled into the
//! binary (`data/fonts/`): no system font is read, so output is byte-identical
//! for identical figures on every machine. Ticks are computed here, not by
//! plotters, so that log axes show decades and every axis shows round numbers.
//!
//! ```
//! use cotenant_report::figure::{Axis, Figure, Series};
//! let mut figure = Figure::new("JCT CDF", Axis::log("JCT", "s"), Axis::linear("fraction of jobs", "0-1"));
//! figure.push(Series::step("fifo", vec![(10.0, 0.5), (100.0, 1.0)]));
//! let svg = figure.to_svg().unwrap();
//! assert!(svg.contains("fifo"));
//! ```

use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// DejaVu Sans, the one font figures use (see `data/fonts/ATTRIBUTION.md`).
static FONT: &[u8] = include_bytes!("../../../data/fonts/DejaVuSans.ttf");

/// The font family name figures draw with; SVG viewers without the font fall
/// back to their own sans-serif.
const FONT_FAMILY: &str = "sans-serif";

/// Default size of a figure in SVG pixels; PNG output is drawn at [`PNG_SCALE`] times this.
pub const DEFAULT_SIZE: (u32, u32) = (800, 450);

/// PNG figures are drawn at this multiple of the SVG size (for print).
pub const PNG_SCALE: u32 = 2;

/// Series colors, in order (Okabe and Ito's palette, readable with color-blindness,
/// then darker shades); series `i` gets `PALETTE[i % PALETTE.len()]`.
pub const PALETTE: [(u8, u8, u8); 10] = [
    (0, 114, 178),
    (213, 94, 0),
    (0, 158, 115),
    (204, 121, 167),
    (230, 159, 0),
    (86, 180, 233),
    (0, 0, 0),
    (240, 228, 66),
    (120, 60, 20),
    (90, 90, 160),
];

/// What went wrong drawing a figure.
#[derive(Debug, thiserror::Error)]
pub enum FigureError {
    #[error("the bundled font could not be loaded")]
    Font,
    #[error("figure {title:?}: {message}")]
    Draw { title: String, message: String },
    #[error("figure {title:?}: series {series:?} has {points} points but {upper} upper values")]
    BandShape { title: String, series: String, points: usize, upper: usize },
    #[error("writing {path}: {source}")]
    Io { path: String, source: std::io::Error },
}

/// How an axis maps values to positions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    Linear,
    /// Base-10 logarithmic; values at or below zero are drawn at the axis minimum.
    Log,
}

/// One axis: what it measures, in which unit, on which scale, over which range.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    pub label: String,
    /// The unit shown after the label, as `label (unit)`; e.g. `s`, `GPUs`, `%`, `0-1`.
    pub unit: String,
    pub scale: Scale,
    /// An explicit range; `None` takes the data's range, widened to round ticks
    /// (and, on a linear axis, to zero when all values are positive and small
    /// compared with the largest).
    pub range: Option<(f64, f64)>,
}

impl Axis {
    /// A linear axis with an automatic range.
    pub fn linear(label: &str, unit: &str) -> Axis {
        Axis { label: label.into(), unit: unit.into(), scale: Scale::Linear, range: None }
    }

    /// A base-10 logarithmic axis with an automatic range.
    pub fn log(label: &str, unit: &str) -> Axis {
        Axis { label: label.into(), unit: unit.into(), scale: Scale::Log, range: None }
    }

    /// The same axis over `low..=high`.
    pub fn with_range(mut self, low: f64, high: f64) -> Axis {
        self.range = Some((low, high));
        self
    }

    /// `label (unit)`, as drawn.
    pub fn title(&self) -> String {
        if self.unit.is_empty() {
            self.label.clone()
        } else {
            format!("{} ({})", self.label, self.unit)
        }
    }
}

/// How a series is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeriesKind {
    /// Straight segments between consecutive points.
    Line,
    /// A step function: each point's value holds until the next point's x.
    Step,
    /// A thin dashed line between consecutive points: references such as a
    /// quota (drawn 1 px wide, as many short segments).
    Dashed,
    /// A marker at each point.
    Points,
    /// A bar from zero (or the axis minimum) to each point; on a categorical x
    /// axis, bar series sit side by side within each category.
    Bars,
    /// A shaded band between `points` (the lower edge) and `upper`.
    Band,
}

/// One named series of points.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub name: String,
    pub kind: SeriesKind,
    /// `(x, y)` in data units; for a band, `y` is the lower edge.
    pub points: Vec<(f64, f64)>,
    /// For a band, the upper edge at each point's x (same length as `points`);
    /// empty otherwise.
    pub upper: Vec<f64>,
    /// Draw with this palette index instead of the series' position (so that a
    /// band and its line share a color).
    pub color: Option<usize>,
}

impl Series {
    fn of(name: &str, kind: SeriesKind, points: Vec<(f64, f64)>) -> Series {
        Series { name: name.into(), kind, points, upper: Vec::new(), color: None }
    }

    /// A line through `points`.
    pub fn line(name: &str, points: Vec<(f64, f64)>) -> Series {
        Series::of(name, SeriesKind::Line, points)
    }

    /// A step function through `points`.
    pub fn step(name: &str, points: Vec<(f64, f64)>) -> Series {
        Series::of(name, SeriesKind::Step, points)
    }

    /// A thin dashed reference line through `points`.
    pub fn dashed(name: &str, points: Vec<(f64, f64)>) -> Series {
        Series::of(name, SeriesKind::Dashed, points)
    }

    /// Markers at `points`.
    pub fn points(name: &str, points: Vec<(f64, f64)>) -> Series {
        Series::of(name, SeriesKind::Points, points)
    }

    /// Bars at `points`.
    pub fn bars(name: &str, points: Vec<(f64, f64)>) -> Series {
        Series::of(name, SeriesKind::Bars, points)
    }

    /// A band through `(x, low, high)` triples.
    pub fn band(name: &str, points: Vec<(f64, f64, f64)>) -> Series {
        let mut series = Series::of(name, SeriesKind::Band, points.iter().map(|p| (p.0, p.1)).collect());
        series.upper = points.iter().map(|p| p.2).collect();
        series
    }

    /// The same series drawn in palette color `index`.
    pub fn with_color(mut self, index: usize) -> Series {
        self.color = Some(index);
        self
    }
}

/// Where the legend sits: beside the plot (right, the default: never hides
/// data) or inside the plot area at a corner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LegendPosition {
    Right,
    UpperLeft,
    UpperRight,
    LowerLeft,
    LowerRight,
}

/// A figure: title, axes, series, legend position, size.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    /// Names of the x categories: when set, point `x` values are category
    /// indices (0, 1, ...) and the x axis shows these names (the x scale and
    /// range are then ignored).
    pub x_categories: Option<Vec<String>>,
    pub series: Vec<Series>,
    pub legend: LegendPosition,
    /// Width and height in SVG pixels.
    pub size: (u32, u32),
}

impl Figure {
    /// An empty figure of [`DEFAULT_SIZE`] with the legend to the right of the plot.
    pub fn new(title: &str, x: Axis, y: Axis) -> Figure {
        Figure {
            title: title.into(),
            x,
            y,
            x_categories: None,
            series: Vec::new(),
            legend: LegendPosition::Right,
            size: DEFAULT_SIZE,
        }
    }

    /// Adds a series (drawn in order, and listed in the legend in order).
    pub fn push(&mut self, series: Series) {
        self.series.push(series);
    }

    /// The same figure with x categories (see [`Figure::x_categories`]).
    pub fn with_categories(mut self, names: Vec<String>) -> Figure {
        self.x_categories = Some(names);
        self
    }

    /// The same figure with its legend at `position`.
    pub fn with_legend(mut self, position: LegendPosition) -> Figure {
        self.legend = position;
        self
    }

    /// The x range drawn: explicit, categorical, or from the data.
    pub fn x_range(&self) -> (f64, f64) {
        if let Some(names) = &self.x_categories {
            return (-0.5, names.len().max(1) as f64 - 0.5);
        }
        let values = self.series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
        resolve_range(&self.x, values, Zero::AsData)
    }

    /// The y range drawn: explicit or from the data (bars start at zero).
    pub fn y_range(&self) -> (f64, f64) {
        let values =
            self.series.iter().flat_map(|s| s.points.iter().map(|p| p.1).chain(s.upper.iter().copied()));
        let zero = if self.series.iter().any(|s| s.kind == SeriesKind::Bars) {
            Zero::Always
        } else {
            Zero::WhenClose
        };
        resolve_range(&self.y, values, zero)
    }

    /// The figure as an SVG document (deterministic: same figure, same bytes).
    pub fn to_svg(&self) -> Result<String, FigureError> {
        self.check()?;
        register_font()?;
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, self.size).into_drawing_area();
            self.draw(&root, 1.0).map_err(|e| self.draw_error(e))?;
            root.present().map_err(|e| self.draw_error(e))?;
        }
        Ok(svg)
    }

    /// The figure as a PNG image, [`PNG_SCALE`] times the SVG size (deterministic).
    pub fn to_png(&self) -> Result<Vec<u8>, FigureError> {
        self.check()?;
        register_font()?;
        let (width, height) = (self.size.0 * PNG_SCALE, self.size.1 * PNG_SCALE);
        let mut pixels = vec![255u8; width as usize * height as usize * 3];
        {
            let root = BitMapBackend::with_buffer(&mut pixels, (width, height)).into_drawing_area();
            self.draw(&root, f64::from(PNG_SCALE)).map_err(|e| self.draw_error(e))?;
            root.present().map_err(|e| self.draw_error(e))?;
        }
        let mut out = Vec::new();
        let mut encoder = png::Encoder::new(&mut out, width, height);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let encoded = encoder
            .write_header()
            .and_then(|mut writer| writer.write_image_data(&pixels).and_then(|()| writer.finish()));
        encoded.map_err(|e| FigureError::Draw {
            title: self.title.clone(),
            message: format!("PNG encoding: {e}"),
        })?;
        Ok(out)
    }

    /// Writes `DIR/NAME.svg` and `DIR/NAME.png`.
    pub fn write_files(&self, dir: &Path, name: &str) -> Result<(), FigureError> {
        let write = |path: std::path::PathBuf, bytes: &[u8]| {
            std::fs::write(&path, bytes)
                .map_err(|source| FigureError::Io { path: path.display().to_string(), source })
        };
        write(dir.join(format!("{name}.svg")), self.to_svg()?.as_bytes())?;
        write(dir.join(format!("{name}.png")), &self.to_png()?)
    }

    fn check(&self) -> Result<(), FigureError> {
        for s in &self.series {
            let expected = if s.kind == SeriesKind::Band { s.points.len() } else { 0 };
            if s.upper.len() != expected {
                return Err(FigureError::BandShape {
                    title: self.title.clone(),
                    series: s.name.clone(),
                    points: s.points.len(),
                    upper: s.upper.len(),
                });
            }
        }
        Ok(())
    }

    fn draw_error(&self, error: impl std::fmt::Display) -> FigureError {
        FigureError::Draw { title: self.title.clone(), message: error.to_string() }
    }

    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        scale: f64,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        let px = |v: f64| (v * scale).round() as i32;
        let font = |size: f64| (FONT_FAMILY, size * scale).into_font();
        root.fill(&WHITE)?;
        let x_axis = AxisMap::new(&self.x, self.x_range(), self.x_categories.as_deref());
        let y_axis = AxisMap::new(&self.y, self.y_range(), None);
        // A legend beside the plot takes the widest name, the sample and padding.
        let legend_width = if self.legend == LegendPosition::Right && !self.series.is_empty() {
            let widest = self.series.iter().map(|s| font(15.0).box_size(&s.name).map_or(0, |b| b.0)).max();
            widest.unwrap_or(0) as i32 + px(52.0)
        } else {
            0
        };
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, font(22.0))
            .margin(px(12.0))
            .margin_right(px(36.0) + legend_width)
            .x_label_area_size(px(52.0))
            .y_label_area_size(px(76.0))
            .build_cartesian_2d(x_axis.coord(), y_axis.coord())?;
        let x_format = |v: &f64| x_axis.label(*v);
        let y_format = |v: &f64| y_axis.label(*v);
        chart
            .configure_mesh()
            .disable_x_mesh()
            .light_line_style(RGBColor(235, 235, 235))
            .bold_line_style(RGBColor(225, 225, 225))
            .axis_style(BLACK.stroke_width(px(1.0).max(1) as u32))
            .x_desc(self.x.title())
            .y_desc(self.y.title())
            .x_label_formatter(&x_format)
            .y_label_formatter(&y_format)
            .label_style(font(15.0))
            .axis_desc_style(font(17.0))
            .x_labels(x_axis.ticks.len().max(2))
            .y_labels(y_axis.ticks.len().max(2))
            .draw()?;
        let stroke = px(2.0).max(1) as u32;
        let bar_series: Vec<usize> =
            (0..self.series.len()).filter(|&i| self.series[i].kind == SeriesKind::Bars).collect();
        for (i, series) in self.series.iter().enumerate() {
            let (r, g, b) = PALETTE[series.color.unwrap_or(i) % PALETTE.len()];
            let color = RGBColor(r, g, b);
            let to_xy = |&(x, y): &(f64, f64)| (x_axis.map(x), y_axis.map(y));
            let line_style = color.stroke_width(stroke);
            match series.kind {
                SeriesKind::Line => {
                    chart.draw_series(LineSeries::new(series.points.iter().map(to_xy), line_style))?
                }
                SeriesKind::Step => {
                    let mut steps = Vec::with_capacity(series.points.len() * 2);
                    for (k, point) in series.points.iter().enumerate() {
                        if k > 0 {
                            steps.push((x_axis.map(point.0), y_axis.map(series.points[k - 1].1)));
                        }
                        steps.push(to_xy(point));
                    }
                    chart.draw_series(LineSeries::new(steps, line_style))?
                }
                SeriesKind::Dashed => chart.draw_series(DashedLineSeries::new(
                    series.points.iter().map(to_xy),
                    px(6.0),
                    px(4.0),
                    color.stroke_width(px(1.0).max(1) as u32),
                ))?,
                SeriesKind::Points => chart.draw_series(
                    series.points.iter().map(|p| Circle::new(to_xy(p), px(3.0), color.filled())),
                )?,
                SeriesKind::Bars => {
                    let slot = bar_series.iter().position(|&b| b == i).unwrap_or(0);
                    let width = self.bar_width() / bar_series.len().max(1) as f64;
                    let base = y_axis.map(y_axis.lower_bar_value());
                    chart.draw_series(series.points.iter().map(|&(x, y)| {
                        let left = x - self.bar_width() / 2.0 + width * slot as f64;
                        let corners =
                            [(x_axis.map(left), base), (x_axis.map(left + width * 0.92), y_axis.map(y))];
                        Rectangle::new(corners, color.filled())
                    }))?
                }
                SeriesKind::Band => {
                    let lower = series.points.iter().map(to_xy);
                    let upper = series
                        .points
                        .iter()
                        .zip(&series.upper)
                        .rev()
                        .map(|(p, &u)| (x_axis.map(p.0), y_axis.map(u)));
                    let outline: Vec<(f64, f64)> = lower.chain(upper).collect();
                    chart.draw_series(std::iter::once(Polygon::new(outline, color.mix(0.22).filled())))?
                }
            };
        }
        // The legend is drawn on the root area: plotters' own is clipped to the
        // plot, so it cannot sit beside it.
        if !self.series.is_empty() {
            let (left, top) = chart.plotting_area().get_base_pixel();
            let (width, height) = chart.plotting_area().dim_in_pixel();
            self.draw_legend(root, scale, (left, top, width as i32, height as i32))?;
        } else {
            let (w, h) = root.dim_in_pixel();
            let style = font(15.0).color(&RGBColor(120, 120, 120)).pos(Pos::new(HPos::Center, VPos::Center));
            root.draw_text("no data", &style, (w as i32 / 2, h as i32 / 2))?;
        }
        Ok(())
    }

    /// The legend: a box listing each series' sample and name, beside the plot
    /// (`plot` = left, top, width, height in pixels) or inside one of its corners.
    fn draw_legend<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        scale: f64,
        (left, top, width, height): (i32, i32, i32, i32),
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        let px = |v: f64| (v * scale).round() as i32;
        let font = (FONT_FAMILY, 15.0 * scale).into_font();
        let widest = self.series.iter().map(|s| font.box_size(&s.name).map_or(0, |b| b.0)).max().unwrap_or(0);
        let (pad, row, sample, gap) = (px(8.0), px(22.0), px(20.0), px(8.0));
        let box_width = pad + sample + gap + widest as i32 + pad;
        let box_height = pad * 2 + row * self.series.len() as i32;
        let margin = px(8.0);
        let (x0, y0) = match self.legend {
            LegendPosition::Right => (left + width + px(14.0), top),
            LegendPosition::UpperLeft => (left + margin, top + margin),
            LegendPosition::UpperRight => (left + width - margin - box_width, top + margin),
            LegendPosition::LowerLeft => (left + margin, top + height - margin - box_height),
            LegendPosition::LowerRight => {
                (left + width - margin - box_width, top + height - margin - box_height)
            }
        };
        let corners = [(x0, y0), (x0 + box_width, y0 + box_height)];
        root.draw(&Rectangle::new(corners, WHITE.mix(0.85).filled()))?;
        root.draw(&Rectangle::new(corners, RGBColor(160, 160, 160)))?;
        let label = font.color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center));
        for (i, series) in self.series.iter().enumerate() {
            let (r, g, b) = PALETTE[series.color.unwrap_or(i) % PALETTE.len()];
            let color = RGBColor(r, g, b);
            let (x, y) = (x0 + pad, y0 + pad + row * i as i32 + row / 2);
            // Samples are rectangles and circles, never polylines: the only polylines
            // in a series' color are its data (tests count their points).
            match series.kind {
                SeriesKind::Bars => {
                    root.draw(&Rectangle::new([(x, y - px(5.0)), (x + sample, y + px(5.0))], color.filled()))?
                }
                SeriesKind::Band => root.draw(&Rectangle::new(
                    [(x, y - px(5.0)), (x + sample, y + px(5.0))],
                    color.mix(0.35).filled(),
                ))?,
                SeriesKind::Points => {
                    root.draw(&Circle::new((x + sample / 2, y), px(4.0), color.filled()))?
                }
                SeriesKind::Line | SeriesKind::Step => {
                    root.draw(&Rectangle::new([(x, y - px(1.5)), (x + sample, y + px(1.5))], color.filled()))?
                }
                SeriesKind::Dashed => {
                    for dash in [0, 2] {
                        let x = x + sample * dash / 4 + px(1.0);
                        root.draw(&Rectangle::new(
                            [(x, y - px(0.5)), (x + sample / 4, y + px(0.5))],
                            color.filled(),
                        ))?
                    }
                }
            }
            root.draw_text(&series.name, &label, (x + sample + gap, y))?;
        }
        Ok(())
    }

    /// The width of one category's group of bars, or of one bar on a numeric axis.
    fn bar_width(&self) -> f64 {
        if self.x_categories.is_some() {
            return 0.8;
        }
        let mut xs: Vec<f64> = self
            .series
            .iter()
            .filter(|s| s.kind == SeriesKind::Bars)
            .flat_map(|s| s.points.iter().map(|p| p.0))
            .collect();
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        let gap = xs.windows(2).map(|w| w[1] - w[0]).fold(f64::INFINITY, f64::min);
        if gap.is_finite() {
            gap * 0.8
        } else {
            let (low, high) = self.x_range();
            (high - low) * 0.05
        }
    }
}

static FONT_REGISTERED: OnceLock<bool> = OnceLock::new();

fn register_font() -> Result<(), FigureError> {
    let ok = *FONT_REGISTERED
        .get_or_init(|| plotters::style::register_font(FONT_FAMILY, FontStyle::Normal, FONT).is_ok());
    if ok {
        Ok(())
    } else {
        Err(FigureError::Font)
    }
}

/// Whether an automatic linear range reaches down (or up) to zero.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Zero {
    /// Only if the data does.
    AsData,
    /// When the data's nearest value to zero is under half its farthest.
    WhenClose,
    Always,
}

/// The range an axis draws: its explicit range, or the data's widened to round ticks.
fn resolve_range(axis: &Axis, values: impl Iterator<Item = f64>, zero: Zero) -> (f64, f64) {
    if let Some(range) = axis.range {
        return range;
    }
    let finite = values.filter(|v| v.is_finite() && (axis.scale == Scale::Linear || *v > 0.0));
    let (mut low, mut high) =
        finite.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if low > high {
        return if axis.scale == Scale::Log { (1.0, 10.0) } else { (0.0, 1.0) };
    }
    match axis.scale {
        Scale::Log => {
            // Wide ranges end on decades; narrow ones (under two decades) on the
            // 1-2-5 sequence. A minimum that is itself on the grid gets one step
            // below it, so that bars of that value are seen.
            let wide = high / low > 100.0;
            let mut snapped_low = snap_log(low, wide, false);
            if snapped_low >= low {
                snapped_low = snap_log(snapped_low * 0.999, wide, false);
            }
            let mut snapped_high = snap_log(high, wide, true);
            if snapped_high <= snapped_low {
                snapped_high = snapped_low * 10.0;
            }
            (snapped_low, snapped_high)
        }
        Scale::Linear => {
            let close = (low > 0.0 && low < high * 0.5) || (high < 0.0 && high > low * 0.5);
            if zero == Zero::Always || (zero == Zero::WhenClose && close) {
                low = low.min(0.0);
                high = high.max(0.0);
            }
            if high <= low {
                high = low + if low == 0.0 { 1.0 } else { low.abs() * 0.1 };
                low -= if low == 0.0 { 0.0 } else { low.abs() * 0.1 };
            }
            let step = nice_step(high - low);
            ((low / step).floor() * step, (high / step).ceil() * step)
        }
    }
}

/// The nearest grid value at or below (`up`: at or above) `value` > 0: a power
/// of ten when `decades`, else 1, 2 or 5 times one.
fn snap_log(value: f64, decades: bool, up: bool) -> f64 {
    let decade = 10f64.powf(value.log10().floor());
    let multiples: &[f64] = if decades { &[1.0, 10.0] } else { &[1.0, 2.0, 5.0, 10.0] };
    let candidates = multiples.iter().map(|m| m * decade);
    if up {
        candidates.into_iter().find(|&c| c >= value * (1.0 - 1e-12)).unwrap_or(decade * 10.0)
    } else {
        candidates.into_iter().rev().find(|&c| c <= value * (1.0 + 1e-12)).unwrap_or(decade)
    }
}

/// Ticks of a log axis over `low..=high` (data values): decades (every k-th, at
/// most 8) over wide ranges, 1-2-5 within two decades.
fn log_ticks(low: f64, high: f64) -> Vec<f64> {
    let (first, last) = (low.log10().floor() as i32, high.log10().ceil() as i32);
    let decades = last - first;
    let multiples: &[f64] = if decades > 2 { &[1.0] } else { &[1.0, 2.0, 5.0] };
    let every = ((decades as f64) / 8.0).ceil().max(1.0) as i32;
    let mut ticks = Vec::new();
    for exponent in (first..=last).filter(|e| (e - first) % every == 0) {
        for m in multiples {
            let value = m * 10f64.powi(exponent);
            if value >= low * (1.0 - 1e-9) && value <= high * (1.0 + 1e-9) {
                ticks.push(value);
            }
        }
    }
    ticks
}

/// A round tick step (1, 2 or 5 times a power of ten) giving four to eight intervals over `span`.
fn nice_step(span: f64) -> f64 {
    let raw = span / 5.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    let fraction = raw / magnitude;
    // Nearest, not next larger: a range rounded to the step wastes less of the plot.
    let nice = if fraction < 1.5 {
        1.0
    } else if fraction < 3.0 {
        2.0
    } else if fraction < 7.0 {
        5.0
    } else {
        10.0
    };
    nice * magnitude
}

/// How one axis maps data values to plotted values (log axes plot log10), and its ticks.
struct AxisMap<'a> {
    scale: Scale,
    /// Plotted range (log10 of the data range on a log axis).
    low: f64,
    high: f64,
    /// Tick positions in plotted values.
    ticks: Vec<f64>,
    step: f64,
    categories: Option<&'a [String]>,
}

impl<'a> AxisMap<'a> {
    fn new(axis: &Axis, (low, high): (f64, f64), categories: Option<&'a [String]>) -> AxisMap<'a> {
        if let Some(names) = categories {
            let ticks = (0..names.len()).map(|i| i as f64).collect();
            return AxisMap { scale: Scale::Linear, low, high, ticks, step: 1.0, categories };
        }
        let (scale, low, high) = match axis.scale {
            Scale::Log => {
                (Scale::Log, low.max(f64::MIN_POSITIVE).log10(), high.max(f64::MIN_POSITIVE).log10())
            }
            Scale::Linear => (Scale::Linear, low, high),
        };
        let high = if high > low { high } else { low + 1.0 };
        if scale == Scale::Log {
            let ticks = log_ticks(10f64.powf(low), 10f64.powf(high)).iter().map(|t| t.log10()).collect();
            return AxisMap { scale, low, high, ticks, step: 1.0, categories: None };
        }
        let step = nice_step(high - low);
        let first = (low / step - 1e-9).ceil() as i64;
        let last = (high / step + 1e-9).floor() as i64;
        let ticks = (first..=last).take(50).map(|k| k as f64 * step).collect();
        AxisMap { scale, low, high, ticks, step, categories: None }
    }

    fn coord(&self) -> TickedRange {
        TickedRange { inner: (self.low..self.high).into(), ticks: self.ticks.clone() }
    }

    /// A data value's plotted position.
    fn map(&self, value: f64) -> f64 {
        match self.scale {
            Scale::Linear => value,
            Scale::Log if value > 0.0 => value.log10(),
            Scale::Log => self.low,
        }
    }

    /// The value bars rise from: zero, or the axis minimum if zero is not on it.
    fn lower_bar_value(&self) -> f64 {
        match self.scale {
            Scale::Linear => 0f64.clamp(self.low, self.high),
            Scale::Log => 10f64.powf(self.low),
        }
    }

    /// A tick's label.
    fn label(&self, plotted: f64) -> String {
        if let Some(names) = self.categories {
            let index = plotted.round();
            return if index >= 0.0 && (index as usize) < names.len() {
                names[index as usize].clone()
            } else {
                String::new()
            };
        }
        match self.scale {
            Scale::Log => {
                // Ticks sit on 1, 2 or 5 times a power of ten: undo log10's rounding.
                let value = 10f64.powf(plotted);
                let magnitude = 10f64.powf(value.log10().floor());
                let value = (value / magnitude).round() * magnitude;
                format_number(value, value)
            }
            Scale::Linear => format_number(plotted, self.step),
        }
    }
}

/// A linear plotted range whose ticks are ours (plotters' combinator for
/// given key points cannot take a label formatter).
struct TickedRange {
    inner: RangedCoordf64,
    ticks: Vec<f64>,
}

impl Ranged for TickedRange {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        // A value far outside the range (a huge or non-finite one in the data)
        // would map past i32's pixels; drawn clipped anyway, it is held within
        // ten spans of the range, where every pixel fits.
        let range = self.inner.range();
        let span = (range.end - range.start).abs();
        let (low, high) = (range.start - 10.0 * span, range.end + 10.0 * span);
        let value = if value.is_nan() {
            range.start
        } else if low <= high {
            value.clamp(low, high)
        } else {
            *value
        };
        self.inner.map(&value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        // Bold grid lines at the ticks; no light ones in between.
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.inner.range()
    }
}

/// A tick label: SI suffixes from 10,000 up, decimals as the step needs.
pub fn format_number(value: f64, step: f64) -> String {
    let magnitude = value.abs();
    if magnitude >= 1e4 && step >= 1.0 {
        let (divisor, suffix) = if magnitude >= 1e9 {
            (1e9, "G")
        } else if magnitude >= 1e6 {
            (1e6, "M")
        } else {
            (1e3, "k")
        };
        let scaled_step = step / divisor;
        let decimals = if scaled_step >= 1.0 { 0 } else { (-scaled_step.log10().floor()) as usize };
        return format!("{:.*}{suffix}", decimals.min(3), value / divisor);
    }
    if magnitude > 0.0 && magnitude < 1e-3 {
        return format!("{value:.0e}");
    }
    let decimals = if step >= 1.0 || step <= 0.0 { 0 } else { (-step.log10().floor()) as usize };
    let text = format!("{:.*}", decimals.min(6), value);
    // "-0" reads as a mistake.
    if text.trim_start_matches('-').chars().all(|c| c == '0' || c == '.') {
        text.trim_start_matches('-').to_string()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::svg_read::{hex, polylines, texts};

    /// The point count of each polyline stroked in `color` (legend samples are paths, not polylines).
    fn polyline_points(svg: &str, color: (u8, u8, u8)) -> Vec<usize> {
        polylines(svg, &hex(color)).iter().map(|p| p.points.len()).collect()
    }

    fn sample() -> Figure {
        let mut figure =
            Figure::new("queue & <wait>", Axis::linear("time", "h"), Axis::linear("jobs", "jobs"));
        figure.push(Series::line("fifo", vec![(0.0, 1.0), (1.0, 3.0), (2.0, 2.0)]));
        figure.push(Series::step("srtf", vec![(0.0, 0.0), (2.0, 4.0)]));
        figure
    }

    #[test]
    fn svg_names_the_series_and_labels_axes_with_units() {
        let svg = sample().to_svg().unwrap();
        assert!(svg.starts_with("<svg"));
        let texts = texts(&svg);
        for expected in ["fifo", "srtf", "time (h)", "jobs (jobs)", "queue & <wait>"] {
            assert!(texts.iter().any(|t| t == expected), "{expected} not in {texts:?}");
        }
        // Each series is one polyline in its palette color: 3 points for the
        // line, 3 for the 2-point step (2n - 1).
        assert_eq!(polyline_points(&svg, PALETTE[0]), vec![3]);
        assert_eq!(polyline_points(&svg, PALETTE[1]), vec![3]);
    }

    #[test]
    fn values_far_outside_the_range_are_drawn_clipped_not_overflowed() {
        // The fuzzer's case: a value of 1e300 on an axis of 0..10 mapped past i32's
        // pixels (a panic in debug builds, garbage in release).
        let x = Axis::linear("load", "x").with_range(0.0, 10.0);
        let mut figure = Figure::new("far", x, Axis::linear("p99", "s").with_range(0.0, 1.0));
        figure.push(Series::line("a", vec![(1.0, 0.5), (1e300, -1e300), (f64::MAX, 0.2)]));
        figure.push(Series::band("b", vec![(1.0, 0.1, 0.9), (1e300, 0.0, 1e300)]));
        figure.push(Series::points("c", vec![(-1e300, 1e300)]));
        let svg = figure.to_svg().unwrap();
        assert_eq!(polyline_points(&svg, PALETTE[0]), vec![3]);
        assert!(figure.to_png().is_ok());
    }

    #[test]
    fn output_is_deterministic() {
        assert_eq!(sample().to_svg().unwrap(), sample().to_svg().unwrap());
        let png = sample().to_png().unwrap();
        assert_eq!(png, sample().to_png().unwrap());
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    }

    #[test]
    fn automatic_ranges_cover_the_data_with_round_ends() {
        let figure = sample();
        assert_eq!(figure.x_range(), (0.0, 2.0));
        assert_eq!(figure.y_range(), (0.0, 4.0));
        let mut log = Figure::new("t", Axis::log("JCT", "s"), Axis::linear("f", "0-1"));
        log.push(Series::line("a", vec![(3.0, 0.1), (4500.0, 0.93)]));
        assert_eq!(log.x_range(), (1.0, 10_000.0));
        assert_eq!(log.y_range(), (0.0, 1.0));
        let explicit = Figure::new("t", Axis::linear("x", "s").with_range(-1.0, 5.0), Axis::linear("y", "s"));
        assert_eq!(explicit.x_range(), (-1.0, 5.0));
    }

    #[test]
    fn bands_must_have_an_upper_value_per_point() {
        let mut figure = sample();
        let mut band = Series::band("spread", vec![(0.0, 1.0, 2.0)]);
        band.upper.clear();
        figure.push(band);
        assert!(matches!(figure.to_svg(), Err(FigureError::BandShape { .. })));
    }

    #[test]
    fn every_kind_draws_including_empty_and_categorical() {
        let mut figure = Figure::new("all", Axis::linear("size", "GPUs"), Axis::log("delay", "s"))
            .with_categories(vec!["1".into(), "2-4".into()]);
        figure.push(Series::bars("fifo", vec![(0.0, 10.0), (1.0, 100.0)]));
        figure.push(Series::bars("las", vec![(0.0, 0.0), (1.0, 50.0)]));
        figure.push(Series::points("p", vec![(0.0, 5.0)]));
        figure.push(Series::band("b", vec![(0.0, 1.0, 2.0), (1.0, 2.0, 3.0)]));
        let svg = figure.to_svg().unwrap();
        assert!(texts(&svg).iter().any(|t| t == "2-4"));
        // Background, legend box, 4 bars, 4 legend swatches.
        assert_eq!(svg.matches("<rect").count(), 2 + 4 + 4, "{svg}");
        assert_eq!(svg.matches("<polygon").count(), 1);
        figure.to_png().unwrap();
        let empty = Figure::new("nothing", Axis::linear("x", "s"), Axis::linear("y", "s"));
        assert!(empty.to_svg().unwrap().contains("no data"));
    }

    #[test]
    fn log_axes_use_decades_when_wide_and_one_two_five_when_narrow() {
        assert_eq!(log_ticks(1.0, 10_000.0), vec![1.0, 10.0, 100.0, 1000.0, 10_000.0]);
        assert_eq!(log_ticks(20_000.0, 200_000.0), vec![20_000.0, 50_000.0, 100_000.0, 200_000.0]);
        let mut narrow = Figure::new("t", Axis::linear("x", "s"), Axis::log("y", "s"));
        narrow.push(Series::line("a", vec![(0.0, 430_000.0), (1.0, 700_000.0)]));
        assert_eq!(narrow.y_range(), (200_000.0, 1_000_000.0));
        // A minimum on the grid gets one step below it (bars of that value show).
        let mut on_grid = Figure::new("t", Axis::linear("x", "s"), Axis::log("y", "s"));
        on_grid.push(Series::bars("a", vec![(0.0, 1.0), (1.0, 3.0)]));
        assert_eq!(on_grid.y_range(), (0.5, 5.0));
        let labels: Vec<String> = log_ticks(0.5, 5.0)
            .iter()
            .map(|t| AxisMap::new(&on_grid.y, (0.5, 5.0), None).label(t.log10()))
            .collect();
        assert_eq!(labels, ["0.5", "1", "2", "5"]);
    }

    #[test]
    fn numbers_read_naturally() {
        assert_eq!(format_number(0.25, 0.05), "0.25");
        assert_eq!(format_number(20_000.0, 5000.0), "20k");
        assert_eq!(format_number(1_500_000.0, 500_000.0), "1.5M");
        assert_eq!(format_number(-0.0, 0.5), "0.0");
        assert_eq!(format_number(3.0, 1.0), "3");
    }
}

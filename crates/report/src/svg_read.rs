//! Reading a figure's data back out of the SVG that [`crate::figure`] writes: the
//! text of its labels and the points of its lines and bands. The tests of every
//! report check figures this way (series names, point counts, axis ranges against
//! the data), and anyone who wants the numbers back from a published SVG can too.
//!
//! This reads what plotters' SVG backend emits (`<text ...>label</text>`,
//! `<polyline ... points="x,y x,y"/>`, `<polygon ... points="..."/>`); it is not a
//! general SVG parser.

/// The hex color (`#RRGGBB`, as the SVG writes it) of a palette entry.
pub fn hex((r, g, b): (u8, u8, u8)) -> String {
    format!("#{r:02X}{g:02X}{b:02X}")
}

/// The inline SVG figures of an HTML page, in order (each from after `<svg` to
/// before `</svg>`).
pub fn svgs(html: &str) -> Vec<&str> {
    html.split("<svg").skip(1).filter_map(|s| s.split_once("</svg>").map(|(svg, _)| svg)).collect()
}

/// The value of attribute `name` in an element's text (from after its tag name).
pub fn attribute<'a>(element: &'a str, name: &str) -> Option<&'a str> {
    Some(element.split_once(&format!(" {name}=\""))?.1.split_once('"')?.0)
}

/// The content of every `<text>` element, in document order, trimmed and with
/// XML entities decoded.
pub fn texts(svg: &str) -> Vec<String> {
    text_elements(svg).map(|(_, text)| unescape(text)).collect()
}

/// Every `<text>` element as (its attributes, its raw content).
pub fn text_elements(svg: &str) -> impl Iterator<Item = (&str, &str)> {
    svg.split("<text").skip(1).filter_map(|t| {
        let (attributes, rest) = t.split_once('>')?;
        Some((attributes, rest.split_once("</text>")?.0.trim()))
    })
}

/// A polyline: its stroke width and its points in pixels.
#[derive(Clone, Debug, PartialEq)]
pub struct Polyline {
    pub stroke_width: Option<f64>,
    pub points: Vec<(f64, f64)>,
}

/// Every polyline stroked in `color` (`#RRGGBB`), in document order. Legend
/// samples are paths, not polylines, so these are the plotted series (and any
/// reference lines in the same color; tell them apart by `stroke_width`).
pub fn polylines(svg: &str, color: &str) -> Vec<Polyline> {
    svg.split("<polyline")
        .skip(1)
        .filter(|p| attribute(p, "stroke") == Some(color))
        .map(|p| Polyline {
            stroke_width: attribute(p, "stroke-width").and_then(|w| w.parse().ok()),
            points: attribute(p, "points").map(pixel_points).unwrap_or_default(),
        })
        .collect()
}

/// The points of every polygon (bands) filled with `color`, in document order.
pub fn polygons(svg: &str, color: &str) -> Vec<Vec<(f64, f64)>> {
    svg.split("<polygon")
        .skip(1)
        .filter(|p| attribute(p, "fill") == Some(color))
        .map(|p| attribute(p, "points").map(pixel_points).unwrap_or_default())
        .collect()
}

/// A tick label's value: `0.5`, `1,500`, `10k`, `1.5M`, `2G`, `1e-4`.
pub fn tick_value(text: &str) -> Option<f64> {
    let (number, scale) = match text.chars().last()? {
        'k' => (&text[..text.len() - 1], 1e3),
        'M' => (&text[..text.len() - 1], 1e6),
        'G' => (&text[..text.len() - 1], 1e9),
        _ => (text, 1.0),
    };
    number.replace(',', "").parse::<f64>().ok().map(|n| n * scale)
}

fn pixel_points(text: &str) -> Vec<(f64, f64)> {
    text.split_whitespace()
        .filter_map(|xy| {
            let (x, y) = xy.split_once(',')?;
            Some((x.parse().ok()?, y.parse().ok()?))
        })
        .collect()
}

fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_texts_lines_bands_and_ticks() {
        let svg = r##"<svg><text x="1" y="2" text-anchor="end">10k</text><text>a &amp; b</text>
<polyline fill="none" stroke="#0072B2" stroke-width="2" points="1,2 3,4 5,6"/>
<polyline fill="none" stroke="#0072B2" stroke-width="1" points="0,0 9,9"/>
<polyline fill="none" stroke="#D55E00" stroke-width="2" points="7,8"/>
<polygon fill="#0072B2" points="1,1 2,2 3,1"/></svg>"##;
        assert_eq!(texts(svg), vec!["10k", "a & b"]);
        let blue = polylines(svg, &hex((0x00, 0x72, 0xB2)));
        assert_eq!(blue.len(), 2);
        assert_eq!(blue[0].points, vec![(1.0, 2.0), (3.0, 4.0), (5.0, 6.0)]);
        assert_eq!(blue[1].stroke_width, Some(1.0));
        assert_eq!(polygons(svg, "#0072B2"), vec![vec![(1.0, 1.0), (2.0, 2.0), (3.0, 1.0)]]);
        assert_eq!(tick_value("10k"), Some(10_000.0));
        assert_eq!(tick_value("1,500"), Some(1_500.0));
        assert_eq!(tick_value("1e-4"), Some(1e-4));
        assert_eq!(tick_value("fifo"), None);
        assert_eq!(svgs("<p><svg a>x</svg><svg b>y</svg>"), vec![" a>x", " b>y"]);
    }
}

//! A small hand-written SVG writer: the elements a timeline needs (rectangles, lines,
//! text, tooltips), a time scale, and ticks at round numbers of seconds.
//!
//! Invariant: every piece of text that reaches the document goes through [`escape`], so a
//! lock name or a problem's detail can never break the XML.

use std::fmt::Write as _;

/// XML-escapes `text` for element content and attribute values alike.
pub(super) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// Virtual seconds of `ns`, as the picture prints every time.
pub(super) fn secs(ns: u64) -> String {
    format!("{:.6}s", ns as f64 / 1e9)
}

/// A document being written: elements are appended in drawing order (later on top).
pub(super) struct Svg {
    body: String,
}

impl Svg {
    pub(super) fn new() -> Self {
        Self {
            body: String::new(),
        }
    }

    /// A rectangle of CSS class `class`, with a tooltip when `title` is not empty.
    pub(super) fn rect(&mut self, (x, y, w, h): (f64, f64, f64, f64), class: &str, title: &str) {
        let _ = write!(
            self.body,
            r#"<rect class="{class}" x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}""#
        );
        self.close_with_title("rect", title);
    }

    /// A line from `(x1, y1)` to `(x2, y2)` of CSS class `class`, with a tooltip when
    /// `title` is not empty.
    pub(super) fn line(
        &mut self,
        (x1, y1, x2, y2): (f64, f64, f64, f64),
        class: &str,
        title: &str,
    ) {
        let _ = write!(
            self.body,
            r#"<line class="{class}" x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}""#
        );
        self.close_with_title("line", title);
    }

    /// Text at `(x, y)` (its baseline's start) of CSS class `class`, with a tooltip when
    /// `title` is not empty.
    pub(super) fn text(&mut self, (x, y): (f64, f64), class: &str, text: &str, title: &str) {
        let _ = write!(
            self.body,
            r#"<text class="{class}" x="{x:.1}" y="{y:.1}">{}"#,
            escape(text)
        );
        if !title.is_empty() {
            let _ = write!(self.body, "<title>{}</title>", escape(title));
        }
        self.body.push_str("</text>\n");
    }

    fn close_with_title(&mut self, element: &str, title: &str) {
        if title.is_empty() {
            self.body.push_str("/>\n");
        } else {
            let _ = writeln!(self.body, "><title>{}</title></{element}>", escape(title));
        }
    }

    /// The document: `width` × `height` pixels, styled by `style` (a CSS sheet).
    pub(super) fn finish(self, (width, height): (f64, f64), style: &str) -> String {
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
             <svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" \
             viewBox=\"0 0 {width:.0} {height:.0}\">\n<style>{style}</style>\n\
             <rect class=\"page\" x=\"0\" y=\"0\" width=\"{width:.0}\" height=\"{height:.0}\"/>\n{}</svg>\n",
            self.body
        )
    }
}

/// Maps a stretch of virtual time onto a stretch of pixels.
#[derive(Debug, Clone, Copy)]
pub(super) struct Scale {
    /// First and last instant shown, virtual ns.
    pub(super) from: u64,
    pub(super) to: u64,
    /// Left edge and width of the plot, px.
    pub(super) left: f64,
    pub(super) width: f64,
}

impl Scale {
    /// The x of instant `t`, clamped to the plot.
    pub(super) fn x(&self, t: u64) -> f64 {
        let t = t.clamp(self.from, self.to);
        self.left + (t - self.from) as f64 * self.px_per_ns()
    }

    pub(super) fn px_per_ns(&self) -> f64 {
        self.width / (self.to.saturating_sub(self.from).max(1)) as f64
    }

    /// Whether `[from, to]` shows at all.
    pub(super) fn shows(&self, from: u64, to: u64) -> bool {
        to >= self.from && from <= self.to
    }

    /// Tick instants at a round step (1, 2 or 5 × a power of ten seconds) giving about
    /// [`TICKS`] ticks.
    pub(super) fn ticks(&self) -> Vec<u64> {
        let span = self.to.saturating_sub(self.from).max(1) as f64;
        let rough = span / TICKS;
        let power = 10f64.powf(rough.log10().floor());
        let step = [1.0, 2.0, 5.0, 10.0]
            .into_iter()
            .map(|m| m * power)
            .find(|s| *s >= rough)
            .unwrap_or(10.0 * power)
            .max(1.0) as u64;
        let first = self.from.div_ceil(step) * step;
        (0..)
            .map(|i| first + i * step)
            .take_while(|t| *t <= self.to)
            .collect()
    }
}

/// Ticks an axis aims for: enough to read a time off, few enough that labels do not touch
/// at the picture's width.
const TICKS: f64 = 10.0;

/// A tick's label: seconds with as many decimals as the step between ticks needs.
pub(super) fn tick_label(t: u64, step: u64) -> String {
    let decimals = match step {
        s if s >= 1_000_000_000 => 0,
        s if s >= 100_000_000 => 1,
        s if s >= 10_000_000 => 2,
        s if s >= 1_000_000 => 3,
        _ => 6,
    };
    format!("{:.*} s", decimals, t as f64 / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_for_xml() {
        assert_eq!(escape(r#"a<b>&"c"'"#), "a&lt;b&gt;&amp;&quot;c&quot;&apos;");
        let mut svg = Svg::new();
        svg.text((0.0, 0.0), "t", "x < y", "a & b");
        let doc = svg.finish((10.0, 10.0), "");
        assert!(doc.contains("x &lt; y<title>a &amp; b</title></text>"));
    }

    #[test]
    fn ticks_fall_on_round_seconds() {
        let scale = Scale {
            from: 0,
            to: 30_000_000_000,
            left: 0.0,
            width: 1000.0,
        };
        let ticks = scale.ticks();
        assert_eq!(ticks.first(), Some(&0));
        assert_eq!(ticks.get(1), Some(&5_000_000_000));
        assert_eq!(ticks.len(), 7);
        assert_eq!(tick_label(5_000_000_000, 5_000_000_000), "5 s");
        let narrow = Scale {
            from: 1_950_000_000,
            to: 3_100_000_000,
            ..scale
        };
        assert_eq!(narrow.ticks().first(), Some(&2_000_000_000));
        assert_eq!(tick_label(2_100_000_000, 100_000_000), "2.1 s");
    }
}

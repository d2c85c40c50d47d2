//! The timings report (`timings.html` beside the step logs, like `cargo build --timings`):
//! one lane per step, a coloured segment per phase (fetch, build requirements, wheel, install,
//! verify, ...) placed on the run's time axis, so builds that ran side by side and the phase
//! that took the time are visible at a glance. Drawn from the event log alone; it deliberately
//! ignores CPU and memory use (the log has none) and needs no script or network to view.

use std::fmt::Write;

use crate::apply::events::Event;

/// One phase of one step: its name, what it did, when it began and ended (seconds).
struct Segment {
    phase: String,
    detail: String,
    from: f64,
    to: f64,
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The report's HTML for `events` (one run).
pub fn html(events: &[Event]) -> String {
    let total = events.iter().map(|e| e.t).fold(0.0_f64, f64::max).max(1e-6);
    let mut steps: Vec<&str> = Vec::new();
    for e in events {
        if !steps.contains(&e.step.as_str()) {
            steps.push(&e.step);
        }
    }
    let mut out = String::new();
    let _ = write!(
        out,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>kiln timings</title><style>\
         body{{font:14px system-ui,sans-serif;margin:2em}} .row{{display:flex;align-items:center;margin:3px 0}}\
         .name{{width:22em;white-space:nowrap;overflow:hidden}} .lane{{position:relative;flex:1;height:20px;background:#f3f3f3}}\
         .seg{{position:absolute;top:0;height:20px;opacity:.9}} .fetch{{background:#6baed6}} .build-requires{{background:#bdbdbd}}\
         .prepare{{background:#9e9ac8}} .wheel{{background:#fd8d3c}} .install{{background:#74c476}} .verify{{background:#31a354}}\
         .restore{{background:#de2d26}} td,th{{padding:2px 10px;text-align:left}} .legend span{{display:inline-block;padding:2px 8px;margin-right:4px}}\
         </style></head><body><h1>kiln install: {} step{}, {:.1} s</h1><p class=\"legend\">",
        steps.len(),
        if steps.len() == 1 { "" } else { "s" },
        total
    );
    for p in [
        "fetch",
        "build-requires",
        "prepare",
        "wheel",
        "install",
        "verify",
        "restore",
    ] {
        let _ = write!(out, "<span class=\"{p}\">{p}</span>");
    }
    out.push_str("</p>");
    let mut table = String::from("<table><tr><th>step</th><th>phase</th><th>seconds</th><th>what</th></tr>");
    for step in &steps {
        let mine: Vec<&Event> = events.iter().filter(|e| e.step == *step).collect();
        let end = mine.iter().map(|e| e.t).fold(0.0_f64, f64::max);
        let result = mine
            .iter()
            .find_map(|e| e.result.clone())
            .unwrap_or_else(|| "unfinished".into());
        let begin = mine.first().map_or(0.0, |e| e.t);
        // The compile cache's record of the step and any warning, under its name.
        let cache = mine
            .iter()
            .find_map(|e| e.compile_cache.as_ref())
            .map(|c| format!(" — {}", c.summary()))
            .unwrap_or_default();
        let mut segments: Vec<Segment> = Vec::new();
        for (i, e) in mine.iter().enumerate().filter(|(_, e)| e.kind == "phase") {
            let to = mine[i + 1..]
                .iter()
                .find(|n| matches!(n.kind.as_str(), "phase" | "finished"))
                .map_or(end, |n| n.t);
            segments.push(Segment {
                phase: e.phase.clone().unwrap_or_default(),
                detail: e.detail.clone().unwrap_or_default(),
                from: e.t,
                to,
            });
        }
        let _ = write!(
            out,
            "<div class=\"row\"><div class=\"name\" title=\"{0}{3}\">{0} ({1}, {2:.1} s)</div><div class=\"lane\">",
            escape(step),
            escape(&result),
            end - begin,
            escape(&cache)
        );
        for w in mine
            .iter()
            .filter(|e| matches!(e.kind.as_str(), "warning" | "measured"))
        {
            let _ = write!(
                table,
                "<tr><td>{}</td><td>{}</td><td>{:.2}</td><td>{}</td></tr>",
                escape(step),
                w.kind,
                w.t,
                escape(w.detail.as_deref().unwrap_or_default())
            );
        }
        if !cache.is_empty() {
            let _ = write!(
                table,
                "<tr><td>{}</td><td>compile cache</td><td></td><td>{}</td></tr>",
                escape(step),
                escape(cache.trim_start_matches(" — "))
            );
        }
        for s in &segments {
            let _ = write!(
                out,
                "<div class=\"seg {}\" style=\"left:{:.3}%;width:{:.3}%\" title=\"{}: {} ({:.1} s)\"></div>",
                escape(&s.phase),
                100.0 * s.from / total,
                (100.0 * (s.to - s.from) / total).max(0.2),
                escape(&s.phase),
                escape(&s.detail),
                s.to - s.from
            );
            let _ = write!(
                table,
                "<tr><td>{}</td><td>{}</td><td>{:.2}</td><td>{}</td></tr>",
                escape(step),
                escape(&s.phase),
                s.to - s.from,
                escape(&s.detail)
            );
        }
        out.push_str("</div></div>");
    }
    table.push_str("</table>");
    out.push_str(&table);
    out.push_str("</body></html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(t: f64, step: &str, kind: &str, phase: Option<&str>, result: Option<&str>) -> Event {
        Event {
            t,
            step: step.into(),
            kind: kind.into(),
            phase: phase.map(str::to_string),
            detail: Some("<x>".into()),
            result: result.map(str::to_string),
            ..Event::default()
        }
    }

    #[test]
    fn each_phase_is_a_segment_on_the_run_axis() {
        let events = [
            ev(0.0, "a", "started", None, None),
            ev(0.0, "a", "phase", Some("wheel"), None),
            ev(5.0, "a", "phase", Some("install"), None),
            ev(10.0, "a", "finished", None, Some("done")),
        ];
        let h = html(&events);
        assert!(h.contains("kiln install: 1 step, 10.0 s"), "{h}");
        assert!(
            h.contains("class=\"seg wheel\" style=\"left:0.000%;width:50.000%\""),
            "{h}"
        );
        assert!(
            h.contains("class=\"seg install\" style=\"left:50.000%;width:50.000%\""),
            "{h}"
        );
        assert!(h.contains("a (done, 10.0 s)"), "{h}");
        assert!(!h.contains("<x>"), "details are escaped");
    }
}

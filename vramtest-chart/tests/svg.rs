//! The timeline picture is valid XML with one series per category, the peak marked
//! with its figure, and every phase and iteration drawn.

mod common;

use common::*;
use roxmltree::Document;
use std::collections::BTreeMap;
use vramtest_chart::{
    CATEGORY_COLORS, DEFAULT_MAX_POINTS, SvgOptions, Timeline, TimelinePoint, XAxis, svg,
};
use vramtest_model::{Category, CategoryBytes, HumanBytes};

fn by_class<'a>(doc: &'a Document, element: &str, class: &str) -> Vec<roxmltree::Node<'a, 'a>> {
    doc.descendants()
        .filter(|n| n.has_tag_name(element) && n.attribute("class") == Some(class))
        .collect()
}

/// The series paths by category, with their fill.
fn series(doc: &Document) -> BTreeMap<Category, String> {
    let mut out = BTreeMap::new();
    for path in by_class(doc, "path", "series") {
        let category: Category = path.attribute("data-category").unwrap().parse().unwrap();
        let previous = out.insert(category, path.attribute("fill").unwrap().to_owned());
        assert!(previous.is_none(), "two series for {category}");
    }
    out
}

/// The smallest y a path reaches: the top of its stack.
fn path_top(d: &str) -> f64 {
    d.match_indices('V')
        .map(|(i, _)| {
            let rest = &d[i + 1..];
            let end = rest
                .find(|c: char| c.is_ascii_alphabetic())
                .unwrap_or(rest.len());
            rest[..end].parse::<f64>().unwrap()
        })
        .fold(f64::INFINITY, f64::min)
}

#[test]
fn the_training_step_has_one_series_per_category_and_its_peak_figure() {
    let timeline = training_timeline();
    assert_eq!(
        timeline.peak.total, EXPECTED_PEAK,
        "the fixture's own arithmetic"
    );
    let text = svg(
        &timeline,
        &SvgOptions {
            title: Some("mlp_step".into()),
            ..SvgOptions::default()
        },
    );
    let doc = Document::parse(&text).expect("the SVG is well-formed XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    assert_eq!(
        doc.root_element().tag_name().namespace(),
        Some("http://www.w3.org/2000/svg")
    );

    let expected: Vec<Category> = vec![
        Category::Parameters,
        Category::Gradients,
        Category::OptimizerState,
        Category::Activations,
        Category::Inputs,
        Category::Temporaries,
    ];
    let found = series(&doc);
    assert_eq!(found.keys().copied().collect::<Vec<_>>(), expected);
    for (category, fill) in &found {
        assert_eq!(fill, CATEGORY_COLORS[category.index()].1, "{category}");
    }

    let labels = by_class(&doc, "text", "peak-label");
    assert_eq!(labels.len(), 1);
    assert_eq!(
        labels[0].text(),
        Some(format!("peak {}", HumanBytes(EXPECTED_PEAK)).as_str())
    );
    assert_eq!(labels[0].text(), Some("peak 33.50 MiB"));

    // The top of the stack (the last category drawn on top of the others' sum) reaches
    // exactly the peak marker.
    let top_series = by_class(&doc, "path", "series")
        .into_iter()
        .find(|p| p.attribute("data-category") == Some("temporaries"))
        .unwrap();
    let circle = doc
        .descendants()
        .find(|n| n.has_tag_name("circle"))
        .unwrap();
    let cy: f64 = circle.attribute("cy").unwrap().parse().unwrap();
    assert_eq!(path_top(top_series.attribute("d").unwrap()), cy);

    // Phases: 2 set-up + 4 per iteration; iterations: 2.
    let phases = by_class(&doc, "rect", "phase");
    assert_eq!(phases.len(), 2 + 2 * 4);
    assert_eq!(phases[3].attribute("data-phase"), Some("forward"));
    assert!(
        by_class(&doc, "text", "phase-label")
            .iter()
            .any(|t| t.text() == Some("forward"))
    );
    assert_eq!(by_class(&doc, "line", "iteration").len(), 2);
    assert!(text.contains(">iteration 1</text>"));

    // The legend shows each category's share of the peak.
    let legend = by_class(&doc, "g", "legend");
    let legend_text: Vec<&str> = legend[0].descendants().filter_map(|n| n.text()).collect();
    assert!(legend_text.contains(&"activations"));
    assert!(legend_text.contains(&HumanBytes(LAYERS * ACTIVATION).to_string().as_str()));
    assert!(legend_text.contains(&"33.50 MiB"));
}

#[test]
fn y_ticks_are_round_binary_sizes_covering_the_peak() {
    let text = svg(&training_timeline(), &SvgOptions::default());
    let doc = Document::parse(&text).unwrap();
    let grid = by_class(&doc, "g", "grid");
    let ticks: Vec<&str> = grid[0]
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .collect();
    // 33.5 MiB over about five intervals: steps of 10 MiB up to 40 MiB.
    assert_eq!(ticks, ["0", "10 MiB", "20 MiB", "30 MiB", "40 MiB"]);
}

fn all_categories_walk(events: u64) -> Vec<TimelinePoint> {
    // A deterministic walk where every category changes.
    let mut live = CategoryBytes::default();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    (0..events)
        .map(|x| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let c = Category::ALL[(state % 8) as usize];
            let step = (state >> 8) % (4 * MIB);
            live[c] = if state & 1 << 40 == 0 {
                live[c] + step
            } else {
                live[c].saturating_sub(step)
            };
            TimelinePoint { x, live }
        })
        .collect()
}

#[test]
fn a_busy_timeline_draws_all_eight_series_and_stays_small() {
    let samples = all_categories_walk(100_000);
    let true_peak = samples.iter().map(TimelinePoint::total).max().unwrap();
    let timeline = Timeline::new(XAxis::Event, &samples, vec![], vec![], DEFAULT_MAX_POINTS);
    let text = svg(&timeline, &SvgOptions::default());
    let doc = Document::parse(&text).unwrap();
    assert_eq!(series(&doc).len(), 8);
    let label = by_class(&doc, "text", "peak-label")[0]
        .text()
        .unwrap()
        .to_owned();
    assert_eq!(label, format!("peak {}", HumanBytes(true_peak)));
    // The one-event spike is drawn (a pixel column wide) up to the peak marker.
    let top = by_class(&doc, "path", "series")
        .into_iter()
        .find(|p| p.attribute("data-category") == Some("untracked"))
        .unwrap();
    let circle = doc
        .descendants()
        .find(|n| n.has_tag_name("circle"))
        .unwrap();
    let cy: f64 = circle.attribute("cy").unwrap().parse().unwrap();
    assert_eq!(path_top(top.attribute("d").unwrap()), cy);
    println!(
        "busy timeline: {} bytes of SVG, {} bytes of JSON",
        text.len(),
        serde_json_len(&timeline)
    );
    assert!(text.len() < 100_000, "{} bytes", text.len());
}

fn serde_json_len(t: &Timeline) -> usize {
    serde_json::to_string(t).unwrap().len()
}

#[test]
fn an_empty_timeline_still_draws_axes_and_says_so() {
    let timeline = Timeline::new(XAxis::Sample, &[], vec![], vec![], DEFAULT_MAX_POINTS);
    let text = svg(&timeline, &SvgOptions::default());
    let doc = Document::parse(&text).unwrap();
    assert!(series(&doc).is_empty());
    assert!(by_class(&doc, "text", "peak-label").is_empty());
    assert!(text.contains("no samples recorded"));
    assert!(text.contains(">sample</text>"));
}

#[test]
fn markup_in_a_title_is_escaped() {
    let title = "step <script>alert(\"x\")</script> & co".to_owned();
    let text = svg(
        &training_timeline(),
        &SvgOptions {
            title: Some(title.clone()),
            ..SvgOptions::default()
        },
    );
    assert!(!text.contains("<script"));
    let doc = Document::parse(&text).unwrap();
    let shown = by_class(&doc, "text", "title")[0].text().unwrap();
    assert_eq!(shown, title);
}

#[test]
#[ignore = "writes the example pictures to a temp dir for a person to look at"]
fn write_examples() {
    let dir = std::env::temp_dir().join("vramtest-chart-examples");
    std::fs::create_dir_all(&dir).unwrap();
    let options = SvgOptions {
        title: Some("mlp_step".into()),
        ..SvgOptions::default()
    };
    std::fs::write(
        dir.join("training.svg"),
        svg(&training_timeline(), &options),
    )
    .unwrap();
    let busy = Timeline::new(
        XAxis::Event,
        &all_categories_walk(100_000),
        vec![],
        vec![],
        DEFAULT_MAX_POINTS,
    );
    std::fs::write(dir.join("busy.svg"), svg(&busy, &options)).unwrap();
    std::fs::write(
        dir.join("report.html"),
        vramtest_chart::html_report(&example_report()),
    )
    .unwrap();
    println!("{}", dir.display());
}

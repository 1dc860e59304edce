//! The one color table: the same category has the same color in every picture.

use vramtest_model::Category;

/// The fill color of each category, in [`Category::ALL`] order (Tableau 10: tells
/// the categories apart for most forms of color blindness). Every picture this crate
/// draws (SVG timeline, HTML bars, legends) reads its colors from here.
pub const CATEGORY_COLORS: [(Category, &str); Category::ALL.len()] = [
    (Category::Parameters, "#4e79a7"),
    (Category::Gradients, "#f28e2b"),
    (Category::OptimizerState, "#59a14f"),
    (Category::Activations, "#e15759"),
    (Category::Inputs, "#76b7b2"),
    (Category::Temporaries, "#edc948"),
    (Category::Workspace, "#b07aa1"),
    (Category::Untracked, "#bab0ac"),
];

/// The color of `category` (`#rrggbb`).
pub fn category_color(category: Category) -> &'static str {
    CATEGORY_COLORS[category.index()].1
}

/// Text, axes and grid.
pub(crate) const INK: &str = "#333333";
pub(crate) const GRID: &str = "#dddddd";
/// The peak marker.
pub(crate) const PEAK: &str = "#b00020";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_keyed_in_category_order_and_colors_are_distinct() {
        for (i, (category, color)) in CATEGORY_COLORS.iter().enumerate() {
            assert_eq!(Category::ALL[i], *category);
            assert_eq!(category_color(*category), *color);
            assert!(color.len() == 7 && color.starts_with('#'), "{color}");
        }
        let mut colors: Vec<_> = CATEGORY_COLORS.iter().map(|(_, c)| *c).collect();
        colors.sort_unstable();
        colors.dedup();
        assert_eq!(colors.len(), CATEGORY_COLORS.len());
    }
}

//! A grid of named integer axes, its points, and what can be wrong with axes, a point,
//! a series or a stored fit.

use std::collections::BTreeMap;

/// The most points a grid may have (each one is a process of its own).
pub const MAX_POINTS: u64 = 256;

/// Worst relative leave-one-out error, in parts per million, above which a fit is
/// flagged and its predictions are not trusted (2%).
pub const FLAG_PPM: u64 = 20_000;

/// The highest power an axis may have in a monomial.
pub const MAX_DEGREE: u8 = 2;

/// A point of a grid: each axis's value.
pub type Point = BTreeMap<String, u64>;

/// What is wrong with axes, a point, a series or a stored fit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AxesError {
    /// A grid without axes.
    #[error("no axes (hint: name at least one, like `batch = [1, 2, 4]`)")]
    NoAxes,
    /// An axis name that is not an identifier.
    #[error(
        "axis name `{axis}` is not a name: use letters, digits and `_`, not starting with a digit"
    )]
    BadName {
        /// The name given.
        axis: String,
    },
    /// The same axis named twice.
    #[error("axis `{axis}` is declared twice")]
    DuplicateAxis {
        /// The axis.
        axis: String,
    },
    /// An axis without values.
    #[error("axis `{axis}` has no values (hint: give at least two, like `{axis} = [1, 2]`)")]
    Empty {
        /// The axis.
        axis: String,
    },
    /// An axis value of 0.
    #[error("axis `{axis}` has the value 0; axis values must be positive")]
    Zero {
        /// The axis.
        axis: String,
    },
    /// A value listed twice.
    #[error("axis `{axis}` lists {value} twice; axis values must be distinct")]
    Duplicate {
        /// The axis.
        axis: String,
        /// The repeated value.
        value: u64,
    },
    /// An axis with too few values for any model.
    #[error(
        "axis `{axis}` has {values} distinct value(s); the model needs at least {needed} (hint: a line needs two values, a checked line three)"
    )]
    TooFewValues {
        /// The axis.
        axis: String,
        /// Its distinct values.
        values: usize,
        /// How many it needs.
        needed: usize,
    },
    /// A grid with more than [`MAX_POINTS`] points.
    #[error("the grid {shape} has {points} points; at most {MAX_POINTS} are allowed")]
    TooManyPoints {
        /// The axes and their sizes (`batch(2) × seq(3)`).
        shape: String,
        /// How many points it has.
        points: u128,
    },
    /// A point naming an axis the grid does not have.
    #[error("unknown axis `{axis}` (the axes are {known})")]
    UnknownAxis {
        /// The name given.
        axis: String,
        /// The grid's axes, comma separated.
        known: String,
    },
    /// A point without a value for one of the axes.
    #[error("no value for axis `{axis}` (the axes are {known})")]
    MissingAxis {
        /// The axis.
        axis: String,
        /// The grid's axes, comma separated.
        known: String,
    },
    /// A series with too few points for any model.
    #[error("a series of {points} point(s) cannot be fitted: the model needs at least 3")]
    TooFewPoints {
        /// How many points it has.
        points: usize,
    },
    /// A stored monomial that does not parse.
    #[error("monomial `{text}`: {reason}")]
    BadMonomial {
        /// The text.
        text: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// A stored coefficient that is not an integer or a fraction.
    #[error("coefficient `{text}` is not an integer or a fraction `n/d`")]
    BadCoefficient {
        /// The text.
        text: String,
    },
    /// A predicted byte count beyond 64 bits.
    #[error("the predicted figure {bytes} B does not fit in 64 bits")]
    TooLarge {
        /// The exact prediction, rounded up.
        bytes: String,
    },
    /// A prediction from a fit that interpolates every combination of its axes' values,
    /// asked to be trusted.
    #[error(
        "the fit has as many terms as there are combinations of the values of {axes} ({combinations}): no held-out point checks its form along them, and its prediction is not trusted"
    )]
    Interpolated {
        /// The axes the formula uses, as a list in words (`batch and seq`).
        axes: String,
        /// How many combinations of their values the grid has.
        combinations: u64,
    },
    /// A prediction from a flagged fit, asked to be trusted.
    #[error(
        "the fit misses a held-out point by {ppm} ppm (over {FLAG_PPM} ppm): its prediction is not trusted"
    )]
    Flagged {
        /// The fit's worst leave-one-out error, in parts per million.
        ppm: u64,
    },
    /// A figure the scaling does not have.
    #[error("no figure `{figure}` in the scaling")]
    UnknownFigure {
        /// The name given.
        figure: String,
    },
    /// A figure that could not be fitted.
    #[error("figure `{figure}`: {source}")]
    Figure {
        /// The figure.
        figure: String,
        /// Why.
        source: Box<AxesError>,
    },
    /// A maximum over no phases.
    #[error("no phases to take the maximum of")]
    NoPhases,
}

/// One axis of a grid: a name and its distinct positive values, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Axis {
    /// The axis's name (`seq`).
    pub name: String,
    /// Its values.
    pub values: Vec<u64>,
}

/// Named integer axes; their points are every combination of the values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grid {
    axes: Vec<Axis>,
}

pub(super) fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn check_axis(name: &str, values: &[u64]) -> Result<(), AxesError> {
    let axis = || name.to_owned();
    if !is_name(name) {
        return Err(AxesError::BadName { axis: axis() });
    }
    if values.is_empty() {
        return Err(AxesError::Empty { axis: axis() });
    }
    if values.contains(&0) {
        return Err(AxesError::Zero { axis: axis() });
    }
    for (i, v) in values.iter().enumerate() {
        if values[..i].contains(v) {
            return Err(AxesError::Duplicate {
                axis: axis(),
                value: *v,
            });
        }
    }
    if values.len() < 2 {
        return Err(AxesError::TooFewValues {
            axis: axis(),
            values: values.len(),
            needed: 2,
        });
    }
    Ok(())
}

impl Grid {
    /// A grid of these axes, in this order (the order of [`Grid::points`] and of the
    /// factors in a monomial). Every axis needs at least two distinct positive values,
    /// the grid at most [`MAX_POINTS`] points (a grid of one axis of two values, a batch
    /// sweep of two sizes, is fitted as the line through them).
    pub fn new<I, S>(axes: I) -> Result<Grid, AxesError>
    where
        I: IntoIterator<Item = (S, Vec<u64>)>,
        S: Into<String>,
    {
        let mut out: Vec<Axis> = Vec::new();
        for (name, values) in axes {
            let name = name.into();
            check_axis(&name, &values)?;
            if out.iter().any(|a| a.name == name) {
                return Err(AxesError::DuplicateAxis { axis: name });
            }
            out.push(Axis { name, values });
        }
        if out.is_empty() {
            return Err(AxesError::NoAxes);
        }
        let points: u128 = out.iter().map(|a| a.values.len() as u128).product();
        if points > u128::from(MAX_POINTS) {
            let shape = out
                .iter()
                .map(|a| format!("{}({})", a.name, a.values.len()))
                .collect::<Vec<_>>()
                .join(" × ");
            return Err(AxesError::TooManyPoints { shape, points });
        }
        Ok(Grid { axes: out })
    }

    /// The grid of a stored scaling's axes (in the names' order).
    pub fn from_map(axes: &BTreeMap<String, Vec<u64>>) -> Result<Grid, AxesError> {
        Grid::new(axes.iter().map(|(k, v)| (k.clone(), v.clone())))
    }

    /// The axes as a map (what a snapshot stores).
    pub fn to_map(&self) -> BTreeMap<String, Vec<u64>> {
        self.axes
            .iter()
            .map(|a| (a.name.clone(), a.values.clone()))
            .collect()
    }

    /// The grid without `level` of `axis` (a figure fitted without a regime of its
    /// own); an error when that leaves the axis too few values.
    pub fn without(&self, axis: &str, level: u64) -> Result<Grid, AxesError> {
        let mut axes = self.to_map();
        if let Some(values) = axes.get_mut(axis) {
            values.retain(|&v| v != level);
        }
        Grid::from_map(&axes)
    }

    /// Each axis at its smallest value: the grid's, or one of `points`' below it (an
    /// axial point, a predicted point below the grid).
    pub fn smallest<'a>(&self, points: impl IntoIterator<Item = &'a Point> + Clone) -> Point {
        (self.axes.iter())
            .map(|a| {
                let below = points
                    .clone()
                    .into_iter()
                    .filter_map(|p| p.get(&a.name).copied());
                let least = a.values.iter().copied().chain(below).min().unwrap_or(1);
                (a.name.clone(), least)
            })
            .collect()
    }

    /// The axes, in order.
    pub fn axes(&self) -> &[Axis] {
        &self.axes
    }

    /// How many points the grid has.
    pub fn len(&self) -> usize {
        self.axes.iter().map(|a| a.values.len()).product()
    }

    /// Never true: a grid has at least 3 points.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every combination of the axes' values: the last axis varies fastest, each axis
    /// through its values in the order given.
    pub fn points(&self) -> Vec<Point> {
        let mut points = vec![Point::new()];
        for axis in &self.axes {
            points = points
                .into_iter()
                .flat_map(|p| {
                    axis.values.iter().map(move |&v| {
                        let mut q = p.clone();
                        q.insert(axis.name.clone(), v);
                        q
                    })
                })
                .collect();
        }
        points
    }

    fn known(&self) -> String {
        let names: Vec<&str> = self.axes.iter().map(|a| a.name.as_str()).collect();
        names.join(", ")
    }

    /// The axis called `name`, or [`AxesError::UnknownAxis`] naming the grid's axes.
    pub fn axis(&self, name: &str) -> Result<&Axis, AxesError> {
        self.axes
            .iter()
            .find(|a| a.name == name)
            .ok_or_else(|| AxesError::UnknownAxis {
                axis: name.to_owned(),
                known: self.known(),
            })
    }

    /// Whether `point` is one of the grid's points: every axis at one of its values (a
    /// target's axial point is not). `point` must name every axis.
    pub fn holds(&self, point: &Point) -> bool {
        (self.axes.iter()).all(|a| a.values.contains(&point[&a.name]))
    }

    /// Checks that `point` gives every axis a positive value and names no other.
    pub fn check_point(&self, point: &Point) -> Result<(), AxesError> {
        for name in point.keys() {
            self.axis(name)?;
        }
        for axis in &self.axes {
            match point.get(&axis.name) {
                None => {
                    return Err(AxesError::MissingAxis {
                        axis: axis.name.clone(),
                        known: self.known(),
                    });
                }
                Some(0) => {
                    return Err(AxesError::Zero {
                        axis: axis.name.clone(),
                    });
                }
                Some(_) => {}
            }
        }
        Ok(())
    }
}

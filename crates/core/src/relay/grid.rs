//! A uniform spatial grid, so that the work per update grows with what is near the
//! object, not with the room's size: subscribers are indexed by the cells their area
//! covers, objects by the cell they are in.
//!
//! The grid is two-dimensional, over the ground plane (x, z — y is up in the draft's
//! default coordinate system): game worlds are wide and flat, so a 3D grid would spend
//! cells on height. Height still counts in the exact area test.

use std::collections::HashMap;

/// Cell edge in metres.
pub const CELL: f32 = 16.0;
/// An area covering more cells than this is treated as covering everything.
pub const MAX_CELLS: usize = 256;

/// A cell's integer coordinates (x, z).
pub type Cell = (i32, i32);

/// The cell holding `p`; `None` for non-finite or far-out positions.
pub fn cell_of(p: [f32; 3]) -> Option<Cell> {
    let c = |v: f32| {
        let q = (v / CELL).floor();
        (q.is_finite() && q.abs() < 1e9).then_some(q as i32)
    };
    Some((c(p[0])?, c(p[2])?))
}

/// The cells an axis-aligned box around `center` overlaps; `None` when more than
/// [`MAX_CELLS`] (or unlocatable).
pub fn cells_covering(center: [f32; 3], half: [f32; 3]) -> Option<Vec<Cell>> {
    let lo = cell_of(std::array::from_fn(|i| center[i] - half[i]))?;
    let hi = cell_of(std::array::from_fn(|i| center[i] + half[i]))?;
    let span = |a: i32, b: i32| usize::try_from(i64::from(b) - i64::from(a) + 1).ok();
    let n = span(lo.0, hi.0)?.checked_mul(span(lo.1, hi.1)?)?;
    if n > MAX_CELLS {
        return None;
    }
    let mut cells = Vec::with_capacity(n);
    for x in lo.0..=hi.0 {
        for z in lo.1..=hi.1 {
            cells.push((x, z));
        }
    }
    Some(cells)
}

/// Emptied cells' member lists kept for reuse, at most.
const SPARE_CELLS: usize = 64;

/// Members per cell.
#[derive(Debug)]
pub struct Grid<T> {
    cells: HashMap<Cell, Vec<T>>,
    /// Member lists of cells that emptied, reused by cells that fill: an object crossing
    /// back and forth between cells allocates nothing.
    spare: Vec<Vec<T>>,
}

impl<T> Default for Grid<T> {
    fn default() -> Self {
        Self {
            cells: HashMap::new(),
            spare: Vec::new(),
        }
    }
}

impl<T: PartialEq + Copy> Grid<T> {
    /// Adds `t` to `cell`.
    pub fn insert(&mut self, cell: Cell, t: T) {
        let spare = &mut self.spare;
        self.cells
            .entry(cell)
            .or_insert_with(|| spare.pop().unwrap_or_default())
            .push(t);
    }

    /// Removes `t` from `cell`.
    pub fn remove(&mut self, cell: Cell, t: T) {
        if let Some(v) = self.cells.get_mut(&cell) {
            // Members are unordered: swap out the first match instead of shifting the rest.
            if let Some(i) = v.iter().position(|x| *x == t) {
                v.swap_remove(i);
            }
            if v.is_empty()
                && let Some(v) = self.cells.remove(&cell)
                && self.spare.len() < SPARE_CELLS
            {
                self.spare.push(v);
            }
        }
    }

    /// The members of `cell`.
    pub fn get(&self, cell: Cell) -> &[T] {
        self.cells.get(&cell).map_or(&[], Vec::as_slice)
    }
}

//! The floor for reading the node: bounded reads of regular files and of
//! `/proc`, opened below a directory descriptor where a path walk could
//! race; threads waited for until a deadline; work shared by two threads;
//! the atomic write beside a file. General machinery, about no kind of
//! evidence: it imports nothing of the crate (`tests/layers.rs` holds it to
//! that), so sources, the archive and the renderers all stand on it.

pub mod beside;
pub mod bounded;
pub mod deadline;
pub mod listed;
pub mod parallel;

//! The factory (seed 000, docs/factory.md): the coordination tracer that proves the control
//! plane with no model in the loop ([`smoke`], over the coordination [`bus`]), and, later,
//! the agent factory.

pub mod bus;
pub mod smoke;

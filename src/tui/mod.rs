//! The cockpit: a full-screen terminal UI, a thin client of the server's API.

pub mod action;
pub mod config;
pub mod keymap;
pub mod keys;
pub mod role;
pub mod theme;
pub mod widgets;

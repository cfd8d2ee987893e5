//! The code inserted before one address: pieces, each shared with what it
//! comes from. A payload's code is one piece for every point that has a
//! copy of it (1.1 million points of rocBLAS's `DD` object hold 30 or so
//! codes): splicing it copies one pointer, and the emitter encodes each
//! piece once.

use crate::stages::payloads::{CodeLine, PayloadCode};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inserted(Vec<PayloadCode>);

impl Inserted {
    /// Its lines, in order.
    pub fn lines(&self) -> impl Iterator<Item = &CodeLine> + '_ {
        self.0.iter().flat_map(|piece| piece.iter())
    }

    pub fn pieces(&self) -> &[PayloadCode] {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|piece| piece.is_empty())
    }

    pub fn first_line(&self) -> Option<&CodeLine> {
        self.lines().next()
    }

    /// `piece` after what is there.
    pub fn push(&mut self, piece: PayloadCode) {
        self.0.push(piece);
    }

    /// `piece` before what is there.
    pub fn push_front(&mut self, piece: PayloadCode) {
        self.0.insert(0, piece);
    }
}

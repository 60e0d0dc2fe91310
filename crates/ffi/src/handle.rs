//! Opaque integer handles: what C holds instead of a pointer to a Rust object. A handle
//! packs its kind (8 bits), a generation (24 bits) and a slot (32 bits), so a handle of
//! another kind, one never issued, and one already freed (its slot's generation moved on)
//! are each told apart and refused, never dereferenced. 0 is never a handle.

use crate::status::{Error, code};
use std::sync::{Arc, Mutex, PoisonError};

/// The kinds of handle, in their top byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A client session.
    Client = 1,
    /// An encoder context.
    Encoder = 2,
    /// A decoder context.
    Decoder = 3,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Self::Client => "client",
            Self::Encoder => "encoder",
            Self::Decoder => "decoder",
        }
    }
}

const GENERATION_MASK: u64 = 0xff_ffff;

struct Slot<T> {
    generation: u64,
    value: Option<Arc<T>>,
}

/// The live objects of one kind. A lookup takes the registry's lock for as long as it
/// takes to clone an `Arc`: once per call, never per object or packet.
pub struct Registry<T> {
    kind: Kind,
    slots: Mutex<Vec<Slot<T>>>,
}

impl<T> Registry<T> {
    /// An empty registry of `kind`.
    pub const fn new(kind: Kind) -> Self {
        Self {
            kind,
            slots: Mutex::new(Vec::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Slot<T>>> {
        // A panic while the lock was held left the table consistent (every write is one
        // assignment), so a poisoned lock is taken as it is.
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `value` and returns its new handle.
    pub fn insert(&self, value: T) -> u64 {
        let mut slots = self.lock();
        let index = match slots.iter().position(|s| s.value.is_none()) {
            Some(i) => i,
            None => {
                slots.push(Slot {
                    generation: 0,
                    value: None,
                });
                slots.len() - 1
            }
        };
        let slot = &mut slots[index];
        slot.generation = (slot.generation + 1) & GENERATION_MASK;
        if slot.generation == 0 {
            slot.generation = 1;
        }
        slot.value = Some(Arc::new(value));
        (self.kind as u64) << 56 | slot.generation << 32 | index as u64
    }

    fn find(&self, handle: u64) -> Result<(usize, u64), Error> {
        let kind = handle >> 56;
        if kind != self.kind as u64 {
            let what = match kind {
                0 if handle == 0 => "0, which is never a handle".to_owned(),
                1 => "a client handle".to_owned(),
                2 => "an encoder handle".to_owned(),
                3 => "a decoder handle".to_owned(),
                _ => format!("{handle:#x}, not a handle"),
            };
            return Err(Error::new(
                code::HANDLE,
                format!("expected a {} handle, got {what}", self.kind.name()),
            ));
        }
        Ok((
            (handle & 0xffff_ffff) as usize,
            (handle >> 32) & GENERATION_MASK,
        ))
    }

    fn stale(&self) -> Error {
        Error::new(
            code::HANDLE,
            format!(
                "the {} handle is not live (freed already, or never issued)",
                self.kind.name()
            ),
        )
    }

    /// The object `handle` names.
    pub fn get(&self, handle: u64) -> Result<Arc<T>, Error> {
        let (index, generation) = self.find(handle)?;
        let slots = self.lock();
        match slots.get(index) {
            Some(Slot {
                generation: g,
                value: Some(v),
            }) if *g == generation => Ok(Arc::clone(v)),
            _ => Err(self.stale()),
        }
    }

    /// Takes the object `handle` names out; the handle is dead from then on.
    pub fn remove(&self, handle: u64) -> Result<Arc<T>, Error> {
        let (index, generation) = self.find(handle)?;
        let mut slots = self.lock();
        match slots.get_mut(index) {
            Some(slot) if slot.generation == generation && slot.value.is_some() => {
                slot.value.take().ok_or_else(|| self.stale())
            }
            _ => Err(self.stale()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_foreign_and_made_up_handles_are_refused() {
        let clients: Registry<u32> = Registry::new(Kind::Client);
        let decoders: Registry<u32> = Registry::new(Kind::Decoder);
        let a = clients.insert(7);
        let d = decoders.insert(9);
        assert_eq!(*clients.get(a).unwrap(), 7);
        assert!(
            clients.get(d).is_err(),
            "a decoder handle is not a client's"
        );
        assert!(clients.get(0).is_err());
        assert!(clients.get(a + 1).is_err(), "a slot never filled");
        assert_eq!(*clients.remove(a).unwrap(), 7);
        assert!(clients.remove(a).is_err(), "double free");
        let b = clients.insert(8);
        assert_ne!(a, b, "the slot is reused under a new generation");
        assert!(clients.get(a).is_err(), "the old handle stays dead");
        assert_eq!(*clients.get(b).unwrap(), 8);
    }
}

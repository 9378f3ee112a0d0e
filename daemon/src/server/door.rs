//! Who gets a connection slot. Every open connection has a [`Slot`] in one
//! table with its peer (`SO_PEERCRED`: uid and pid), when it last sent a
//! message, whether it ever sent a frame and whether it has frames in
//! flight. Three limits apply to a new connection: its pid's
//! (`max_connections_per_pid`), its uid's (`max_connections_per_uid`) and
//! the total (`max_connections`). At a limit, the new connection takes the
//! slot of a connection within that limit's scope (the same pid, the same
//! uid, anyone) that has no frame in flight: one that never sent a frame
//! first, then the longest idle. That connection is closed with an `Error`
//! (connection limit) after its answers are written. When every connection
//! in the scope has a frame in flight, the new one is refused.
//!
//! So a client cannot hold the door by connecting: idle and half-open
//! connections give way to new ones, and the connections that cannot be
//! taken over are those waiting for answers, of which there are at most
//! `max_pending` plus the pipelines' frames in flight (every other frame is
//! answered at once). Evicted connections still close on their own time
//! (their answers are written first); at most `max_connections` of them may
//! be closing at once, past that new connections are refused.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use tokio::sync::Notify;

/// The peer of a Unix connection, from `SO_PEERCRED`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peer {
    /// User id.
    pub uid: u32,
    /// Process id, when the kernel gave one.
    pub pid: Option<i32>,
}

/// The three limits of [`Door`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DoorLimits {
    /// Connections at once.
    pub total: usize,
    /// Connections of one uid at once.
    pub per_uid: usize,
    /// Connections of one pid at once.
    pub per_pid: usize,
}

/// One open connection as the door sees it.
pub struct Slot {
    /// Connection id.
    pub id: u64,
    /// Who connected.
    pub peer: Peer,
    start: Instant,
    /// Last message read, µs since the door's start.
    last_message_us: AtomicU64,
    sent_frame: AtomicBool,
    /// Whether the connection has frames in flight (set by the connection).
    busy: Mutex<Option<Box<dyn Fn() -> bool + Send + Sync>>>,
    evicted: AtomicBool,
    /// Wakes the connection's reader when it is evicted.
    pub evict: Notify,
}

impl Slot {
    /// The connection read a whole message (`frame`: a frame).
    pub fn touched(&self, frame: bool) {
        let us = u64::try_from(self.start.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.last_message_us.store(us, Ordering::Relaxed);
        if frame {
            self.sent_frame.store(true, Ordering::Relaxed);
        }
    }

    /// Tells the door how to learn whether the connection has frames in flight.
    pub fn set_busy(&self, busy: impl Fn() -> bool + Send + Sync + 'static) {
        *self.busy.lock().unwrap_or_else(PoisonError::into_inner) = Some(Box::new(busy));
    }

    /// True once the door gave this connection's slot to another.
    pub fn is_evicted(&self) -> bool {
        self.evicted.load(Ordering::Acquire)
    }

    fn is_busy(&self) -> bool {
        self.busy
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_some_and(|f| f())
    }

    /// Eviction order: never sent a frame first, then longest idle.
    fn eviction_key(&self) -> (bool, u64) {
        (
            self.sent_frame.load(Ordering::Relaxed),
            self.last_message_us.load(Ordering::Relaxed),
        )
    }
}

/// What the door decided for a new connection.
pub enum Entry {
    /// In, with its slot; `evicted` lost theirs to it.
    Admitted {
        /// The new connection's slot.
        slot: Arc<Slot>,
        /// Connections whose slots it took (already told to close).
        evicted: Vec<Arc<Slot>>,
    },
    /// Refused: why, for the client's `Error`.
    Refused(String),
}

#[derive(Default)]
struct Table {
    open: HashMap<u64, Arc<Slot>>,
    /// Evicted connections not closed yet.
    closing: usize,
}

/// Whose connections a limit counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scope {
    /// The new connection's process.
    Process,
    /// Its user.
    User,
    /// Every client.
    All,
}

impl Scope {
    /// Whether a connection of `other` counts in this scope for `new`.
    fn holds(self, new: Peer, other: Peer) -> bool {
        match self {
            Scope::Process => new.pid.is_some() && other.pid == new.pid,
            Scope::User => other.uid == new.uid,
            Scope::All => true,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Scope::Process => "this process",
            Scope::User => "this user",
            Scope::All => "all clients",
        }
    }
}

/// The connection table (see the module docs).
pub struct Door {
    limits: DoorLimits,
    start: Instant,
    table: Mutex<Table>,
}

impl Door {
    /// An empty table with `limits`.
    pub fn new(limits: DoorLimits) -> Self {
        Self {
            limits,
            start: Instant::now(),
            table: Mutex::new(Table::default()),
        }
    }

    /// The limits.
    pub fn limits(&self) -> DoorLimits {
        self.limits
    }

    /// Decides for connection `id` from `peer` (see the module docs).
    pub fn enter(&self, id: u64, peer: Peer) -> Entry {
        let mut t = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        let scopes = [
            (Scope::Process, self.limits.per_pid),
            (Scope::User, self.limits.per_uid),
            (Scope::All, self.limits.total),
        ];
        let mut evicted = Vec::new();
        for (scope, limit) in scopes {
            let within = |s: &Slot| scope.holds(peer, s.peer);
            let count = t.open.values().filter(|s| within(s)).count();
            if count < limit {
                continue;
            }
            let refuse = |why: &str| {
                Entry::Refused(format!(
                    "too many connections from {} (at most {limit}){why}",
                    scope.name()
                ))
            };
            if t.closing >= self.limits.total {
                return refuse(", and too many are closing");
            }
            let victim = t
                .open
                .values()
                .filter(|s| within(s) && !s.is_busy())
                .min_by_key(|s| s.eviction_key())
                .cloned();
            let Some(victim) = victim else {
                return refuse(" and every one has frames in flight");
            };
            t.open.remove(&victim.id);
            t.closing += 1;
            victim.evicted.store(true, Ordering::Release);
            victim.evict.notify_one();
            evicted.push(victim);
        }
        let slot = Arc::new(Slot {
            id,
            peer,
            start: self.start,
            last_message_us: AtomicU64::new(
                u64::try_from(self.start.elapsed().as_micros()).unwrap_or(u64::MAX),
            ),
            sent_frame: AtomicBool::new(false),
            busy: Mutex::new(None),
            evicted: AtomicBool::new(false),
            evict: Notify::new(),
        });
        t.open.insert(id, Arc::clone(&slot));
        Entry::Admitted { slot, evicted }
    }

    /// Connection `slot` has closed.
    pub fn leave(&self, slot: &Slot) {
        let mut t = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.is_evicted() {
            t.closing = t.closing.saturating_sub(1);
        } else {
            t.open.remove(&slot.id);
        }
    }

    /// Connections holding a slot now.
    pub fn open(&self) -> usize {
        self.table
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .open
            .len()
    }
}

/// File descriptors kept for everything but client connections: the
/// listeners, HTTP connections (`http::MAX_CONNECTIONS`), evicted and
/// refused connections still closing, model files, the runtime's own.
pub const FD_RESERVE: u64 = 256;

/// Raises the process's soft limit on open files to its hard limit and
/// returns how many client connections that leaves room for: a third of
/// what is left after [`FD_RESERVE`], since as many connections again may be
/// closing after an eviction and as many again being refused, each still
/// holding its descriptor.
pub fn fd_budget() -> usize {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit write/read the struct we own.
    let soft = unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return usize::MAX;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                lim.rlim_cur = lim.rlim_max;
            }
        }
        lim.rlim_cur
    };
    if soft == libc::RLIM_INFINITY {
        return usize::MAX;
    }
    usize::try_from(soft.saturating_sub(FD_RESERVE) / 3).unwrap_or(usize::MAX)
}

#[cfg(test)]
#[path = "door_tests.rs"]
mod tests;

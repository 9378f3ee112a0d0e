//! The door's rules on fabricated peers (the server tests drive it over a real socket).

use super::*;

fn peer(uid: u32, pid: i32) -> Peer {
    Peer {
        uid,
        pid: Some(pid),
    }
}

fn limits(total: usize, per_uid: usize, per_pid: usize) -> DoorLimits {
    DoorLimits {
        total,
        per_uid,
        per_pid,
    }
}

/// Admits connection `id`; panics on a refusal. The ids it evicted.
fn admit(door: &Door, id: u64, p: Peer) -> (Arc<Slot>, Vec<u64>) {
    match door.enter(id, p) {
        Entry::Admitted { slot, evicted } => (slot, evicted.iter().map(|s| s.id).collect()),
        Entry::Refused(why) => panic!("connection {id} refused: {why}"),
    }
}

fn refused(door: &Door, id: u64, p: Peer) -> String {
    match door.enter(id, p) {
        Entry::Refused(why) => why,
        Entry::Admitted { .. } => panic!("connection {id} admitted"),
    }
}

#[test]
fn a_full_table_gives_the_slot_of_one_that_never_sent_a_frame_then_the_longest_idle() {
    let door = Door::new(limits(3, 10, 10));
    let (a, _) = admit(&door, 1, peer(1, 1));
    let (b, _) = admit(&door, 2, peer(2, 2));
    let (c, _) = admit(&door, 3, peer(3, 3));
    // a and b sent frames (a longest ago); c only said Hello, most recently.
    a.touched(true);
    std::thread::sleep(std::time::Duration::from_millis(2));
    b.touched(true);
    std::thread::sleep(std::time::Duration::from_millis(2));
    c.touched(false);
    let (d, evicted) = admit(&door, 4, peer(4, 4));
    assert_eq!(evicted, [3], "never sent a frame goes first");
    assert!(c.is_evicted());
    // The newcomer sends a frame: now every one has, and a is idle the longest.
    d.touched(true);
    let (_, evicted) = admit(&door, 5, peer(5, 5));
    assert_eq!(evicted, [1], "then the longest idle");
    assert_eq!(door.open(), 3);
}

#[test]
fn connections_with_frames_in_flight_keep_their_slots() {
    let door = Door::new(limits(2, 10, 10));
    let (a, _) = admit(&door, 1, peer(1, 1));
    let (b, _) = admit(&door, 2, peer(2, 2));
    a.set_busy(|| true);
    b.set_busy(|| true);
    let why = refused(&door, 3, peer(3, 3));
    assert_eq!(
        why,
        "too many connections from all clients (at most 2) and every one has frames in flight"
    );
    b.set_busy(|| false);
    let (_, evicted) = admit(&door, 4, peer(3, 3));
    assert_eq!(evicted, [2]);
}

#[test]
fn a_uid_or_a_pid_over_its_cap_gives_up_its_own_slots_not_others() {
    let door = Door::new(limits(100, 2, 10));
    let (_, _) = admit(&door, 1, peer(7, 70));
    std::thread::sleep(std::time::Duration::from_millis(2));
    let (_, _) = admit(&door, 2, peer(1, 10)); // another user, idle longer than 3
    let (_, _) = admit(&door, 3, peer(7, 71));
    let (_, evicted) = admit(&door, 4, peer(7, 72));
    assert_eq!(evicted, [1], "uid 7's longest idle, not uid 1's");
    let door = Door::new(limits(100, 100, 1));
    let (busy, _) = admit(&door, 1, peer(7, 70));
    busy.set_busy(|| true);
    let why = refused(&door, 2, peer(7, 70));
    assert!(why.starts_with("too many connections from this process (at most 1)"));
    admit(&door, 3, peer(7, 71));
}

#[test]
fn a_closed_connection_frees_its_slot_and_an_evicted_one_its_closing_place() {
    let door = Door::new(limits(1, 1, 1));
    let (a, _) = admit(&door, 1, peer(1, 1));
    let (b, evicted) = admit(&door, 2, peer(2, 2));
    assert_eq!(evicted, [1]);
    // a is closing: while it is, one more eviction would pass the total.
    b.touched(false);
    let why = refused(&door, 3, peer(3, 3));
    assert!(why.ends_with("and too many are closing"), "{why}");
    door.leave(&a);
    let (c, evicted) = admit(&door, 3, peer(3, 3));
    assert_eq!(evicted, [2]);
    door.leave(&b);
    door.leave(&c);
    assert_eq!(door.open(), 0);
}

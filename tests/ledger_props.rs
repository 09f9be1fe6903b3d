//! Property: after random appends and a cut at a random byte (what a crash can leave of an
//! append-only file), reopening keeps exactly the lines that were completely written, moves
//! the partial line aside with its exact bytes, records it, and verifies.

use std::fs;

use proctor::ledger::{self, Ledger, RECOVERY_KIND, Reason};
use proptest::prelude::*;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

fn arb_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<String>().prop_map(Value::String),
        "[a-z \\n\\t\u{1b}\u{9b}é\"\\\\]{0,12}".prop_map(Value::String),
    ]
}

fn arb_fields() -> impl Strategy<Value = Map<String, Value>> {
    let value = arb_leaf().prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,4}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    prop::collection::btree_map("[a-z_][a-z0-9_é]{0,6}", value, 0..5).prop_map(|m| {
        m.into_iter()
            .filter(|(k, _)| !ledger::RESERVED_FIELDS.contains(&k.as_str()))
            .collect()
    })
}

fn arb_kind() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9_]{0,5}(\\.[a-z][a-z0-9_]{0,5}){1,3}"
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn exactly_the_completely_written_lines_survive_a_cut(
        events in prop::collection::vec((arb_kind(), arb_fields()), 1..12),
        cut in any::<prop::sample::Index>(),
    ) {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("ledger.jsonl");
        let (l, _) = Ledger::open(&p).unwrap();
        // Where each acknowledged line ends: the file length when append returned.
        let mut ends = Vec::new();
        for (i, (kind, fields)) in events.iter().enumerate() {
            let seq = l.append(kind, fields).unwrap();
            prop_assert_eq!(seq, i as u64 + 1);
            ends.push(fs::metadata(&p).unwrap().len());
        }
        drop(l);
        let original = fs::read(&p).unwrap();
        prop_assert_eq!(*ends.last().unwrap(), original.len() as u64);

        // A cut anywhere from 0 to the full length.
        let cut = cut.index(original.len() + 1);
        fs::write(&p, &original[..cut]).unwrap();
        let survivors = ends.iter().filter(|&&e| e as usize <= cut).count();
        let boundary = if survivors == 0 { 0 } else { ends[survivors - 1] as usize };
        let partial = &original[boundary..cut];

        let (l, opened) = Ledger::open(&p).unwrap();
        prop_assert_eq!(opened.events, survivors as u64);
        let now = fs::read(&p).unwrap();
        // The acknowledged prefix is byte for byte intact.
        prop_assert_eq!(&now[..boundary], &original[..boundary]);
        if partial.is_empty() {
            prop_assert!(opened.recovered.is_empty());
            prop_assert_eq!(now.len(), boundary);
            prop_assert_eq!(l.last_seq(), survivors as u64);
        } else {
            prop_assert_eq!(opened.recovered.len(), 1);
            let r = &opened.recovered[0];
            prop_assert_eq!(r.seq, survivors as u64 + 1);
            prop_assert_eq!(r.bytes, partial.len() as u64);
            prop_assert_eq!(&r.sha256, &format!("sha256:{}", hex::encode(Sha256::digest(partial))));
            prop_assert_eq!(r.offset, Some(boundary as u64));
            prop_assert_eq!(r.reason, Some(Reason::MissingFinalLf));
            // The moved-aside file holds exactly the partial bytes.
            prop_assert_eq!(fs::read(t.path().join(&r.moved_to)).unwrap(), partial);
            // And the ledger records it right after the survivors.
            let last: Value = serde_json::from_slice(&now[boundary..]).unwrap();
            prop_assert_eq!(&last["kind"], RECOVERY_KIND);
            prop_assert_eq!(&last["moved_to"], &Value::String(r.moved_to.clone()));
            prop_assert_eq!(&last["bytes"], &Value::from(partial.len()));
        }
        // The survivors are the events that were appended, in order.
        for (i, line) in now[..boundary].split(|&b| b == b'\n').take(survivors).enumerate() {
            let v: Map<String, Value> = serde_json::from_slice(line).unwrap();
            prop_assert_eq!(&v["kind"], &Value::String(events[i].0.clone()));
            for (k, val) in &events[i].1 {
                prop_assert_eq!(&v[k], val);
            }
        }
        drop(l);
        let v = ledger::verify(&p).unwrap();
        prop_assert_eq!(v.fixed_point.events, survivors as u64 + u64::from(!partial.is_empty()));
        prop_assert_eq!(v.fixed_point.bytes, fs::metadata(&p).unwrap().len());
    }
}

//! A number inside a reply message, read from its bytes without the descriptors (which the
//! engine does not carry): `--sent-at`'s field, whose path and kind
//! [`crate::UnaryCall::field_path`] resolved from the proto.

use serde::{Deserialize, Serialize};

/// How the number is encoded (its proto type).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NumberKind {
    /// `uint64`, `uint32`: a varint.
    Unsigned,
    /// `int64`, `int32`: a varint, two's complement.
    Signed,
    /// `sint64`, `sint32`: a zigzag varint.
    Zigzag,
    /// `fixed64`.
    Fixed64,
    /// `sfixed64`.
    Sfixed64,
    /// `fixed32`.
    Fixed32,
    /// `sfixed32`.
    Sfixed32,
    /// `double`.
    Double,
    /// `float`.
    Float,
    /// `google.protobuf.Timestamp`: seconds (1) and nanoseconds (2), read as seconds.
    Timestamp,
}

/// A number field at a path of field numbers (each before the last a message field).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldPath {
    /// The field numbers from the top message down.
    pub numbers: Vec<u32>,
    /// How the last is encoded.
    pub kind: NumberKind,
    /// The path as given (`/meta/sent_at_us`), for messages.
    pub pointer: String,
}

impl FieldPath {
    /// The number in `message` (its value as the field's last occurrence, as protobuf
    /// reads it), or `None` when the message does not hold it or is malformed.
    pub fn read(&self, message: &[u8]) -> Option<f64> {
        let (last, parents) = self.numbers.split_last()?;
        let mut m = message;
        for n in parents {
            m = last_field(m, *n, 2)?.as_bytes()?;
        }
        let wire = match self.kind {
            NumberKind::Unsigned | NumberKind::Signed | NumberKind::Zigzag => 0,
            NumberKind::Fixed64 | NumberKind::Sfixed64 | NumberKind::Double => 1,
            NumberKind::Fixed32 | NumberKind::Sfixed32 | NumberKind::Float => 5,
            NumberKind::Timestamp => 2,
        };
        let v = last_field(m, *last, wire)?;
        Some(match (self.kind, v) {
            (NumberKind::Unsigned, Value::Varint(v)) => v as f64,
            (NumberKind::Signed, Value::Varint(v)) => v as i64 as f64,
            (NumberKind::Zigzag, Value::Varint(v)) => ((v >> 1) as i64 ^ -((v & 1) as i64)) as f64,
            (NumberKind::Fixed64, Value::Fixed64(v)) => v as f64,
            (NumberKind::Sfixed64, Value::Fixed64(v)) => v as i64 as f64,
            (NumberKind::Double, Value::Fixed64(v)) => f64::from_bits(v),
            (NumberKind::Fixed32, Value::Fixed32(v)) => f64::from(v),
            (NumberKind::Sfixed32, Value::Fixed32(v)) => f64::from(v as i32),
            (NumberKind::Float, Value::Fixed32(v)) => f64::from(f32::from_bits(v)),
            (NumberKind::Timestamp, Value::Bytes(t)) => {
                let secs = match last_field(t, 1, 0) {
                    Some(Value::Varint(s)) => s as i64 as f64,
                    _ => 0.0,
                };
                let nanos = match last_field(t, 2, 0) {
                    Some(Value::Varint(n)) => n as i64 as f64,
                    _ => 0.0,
                };
                secs + nanos / 1e9
            }
            _ => return None,
        })
    }
}

/// One field's value on the wire.
#[derive(Clone, Copy, Debug)]
enum Value<'a> {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    Bytes(&'a [u8]),
}

impl<'a> Value<'a> {
    fn as_bytes(self) -> Option<&'a [u8]> {
        match self {
            Value::Bytes(b) => Some(b),
            _ => None,
        }
    }
}

/// The last occurrence of field `number` with wire type `wire` in `m`; `None` if absent or
/// the message is malformed.
fn last_field(mut m: &[u8], number: u32, wire: u8) -> Option<Value<'_>> {
    let mut found = None;
    while !m.is_empty() {
        let key = varint(&mut m)?;
        let (n, w) = ((key >> 3) as u32, (key & 7) as u8);
        let v = match w {
            0 => Value::Varint(varint(&mut m)?),
            1 => {
                let (b, rest) = m.split_first_chunk::<8>()?;
                m = rest;
                Value::Fixed64(u64::from_le_bytes(*b))
            }
            2 => {
                let len = usize::try_from(varint(&mut m)?).ok()?;
                let b = m.get(..len)?;
                m = &m[len..];
                Value::Bytes(b)
            }
            5 => {
                let (b, rest) = m.split_first_chunk::<4>()?;
                m = rest;
                Value::Fixed32(u32::from_le_bytes(*b))
            }
            _ => return None,
        };
        if n == number && w == wire {
            found = Some(v);
        }
    }
    found
}

fn varint(m: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = m.split_first()?;
        *m = rest;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u32, w: u8, out: &mut Vec<u8>) {
        put_varint(u64::from(n << 3 | u32::from(w)), out);
    }

    fn put_varint(mut v: u64, out: &mut Vec<u8>) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    fn path(numbers: &[u32], kind: NumberKind) -> FieldPath {
        FieldPath {
            numbers: numbers.to_vec(),
            kind,
            pointer: String::new(),
        }
    }

    #[test]
    fn reads_each_kind_at_depth_and_takes_the_last_occurrence() {
        // { 1: "x", 2: 5, 2: 1_700_000_000_000_000 (µs), 3: { 4: double 1.7e9 } }
        let mut m = Vec::new();
        key(1, 2, &mut m);
        m.extend([1, b'x']);
        key(2, 0, &mut m);
        put_varint(5, &mut m);
        key(2, 0, &mut m);
        put_varint(1_700_000_000_000_000, &mut m);
        let mut inner = Vec::new();
        key(4, 1, &mut inner);
        inner.extend(1.7e9f64.to_bits().to_le_bytes());
        key(3, 2, &mut m);
        put_varint(inner.len() as u64, &mut m);
        m.extend(&inner);
        assert_eq!(
            path(&[2], NumberKind::Unsigned).read(&m),
            Some(1_700_000_000_000_000.0)
        );
        assert_eq!(path(&[3, 4], NumberKind::Double).read(&m), Some(1.7e9));
        // Absent, or of another wire type: nothing.
        assert_eq!(path(&[9], NumberKind::Unsigned).read(&m), None);
        assert_eq!(path(&[1], NumberKind::Unsigned).read(&m), None);
        assert_eq!(path(&[3, 5], NumberKind::Double).read(&m), None);
        // A Timestamp: seconds and nanoseconds.
        let mut t = Vec::new();
        key(1, 0, &mut t);
        put_varint(1_700_000_000, &mut t);
        key(2, 0, &mut t);
        put_varint(500_000_000, &mut t);
        let mut m = Vec::new();
        key(7, 2, &mut m);
        put_varint(t.len() as u64, &mut m);
        m.extend(&t);
        assert_eq!(
            path(&[7], NumberKind::Timestamp).read(&m),
            Some(1_700_000_000.5)
        );
        // Zigzag, fixed32, float.
        let mut m = Vec::new();
        key(1, 0, &mut m);
        put_varint(3, &mut m); // zigzag -2
        key(2, 5, &mut m);
        m.extend(7u32.to_le_bytes());
        key(3, 5, &mut m);
        m.extend(2.5f32.to_bits().to_le_bytes());
        assert_eq!(path(&[1], NumberKind::Zigzag).read(&m), Some(-2.0));
        assert_eq!(path(&[2], NumberKind::Fixed32).read(&m), Some(7.0));
        assert_eq!(path(&[3], NumberKind::Float).read(&m), Some(2.5));
        // Malformed: cut inside a field.
        assert_eq!(path(&[2], NumberKind::Fixed32).read(&m[..4]), None);
    }
}

//! The remote write 1.0 messages (`prometheus/prompb/remote.proto` and `types.proto`),
//! written by hand as `prost` messages: only the fields loadlab sends. A body is a
//! `WriteRequest` in protobuf, compressed in snappy's block format.

/// `prometheus.WriteRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WriteRequest {
    /// Every series of this push.
    #[prost(message, repeated, tag = "1")]
    pub timeseries: Vec<TimeSeries>,
}

/// `prometheus.TimeSeries`: labels (the metric's name as `__name__`) and its samples or
/// native histograms.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TimeSeries {
    /// Sorted by name, `__name__` among them.
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<Label>,
    /// Float samples.
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<Sample>,
    /// Native histograms.
    #[prost(message, repeated, tag = "4")]
    pub histograms: Vec<Histogram>,
}

/// `prometheus.Label`.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, prost::Message)]
pub struct Label {
    /// Name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Value.
    #[prost(string, tag = "2")]
    pub value: String,
}

/// `prometheus.Sample`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Sample {
    /// Value.
    #[prost(double, tag = "1")]
    pub value: f64,
    /// Milliseconds since the Unix epoch.
    #[prost(int64, tag = "2")]
    pub timestamp: i64,
}

/// `prometheus.Histogram`, integer counts only (the `count` and `zero_count` oneofs as
/// their integer members).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Histogram {
    /// Observations (`count_int`).
    #[prost(uint64, optional, tag = "1")]
    pub count_int: Option<u64>,
    /// Sum of the observations.
    #[prost(double, tag = "3")]
    pub sum: f64,
    /// Resolution: bucket boundaries are powers of 2^(2^-schema).
    #[prost(sint32, tag = "4")]
    pub schema: i32,
    /// Observations at most this far from zero go to the zero bucket.
    #[prost(double, tag = "5")]
    pub zero_threshold: f64,
    /// Observations in the zero bucket (`zero_count_int`).
    #[prost(uint64, optional, tag = "6")]
    pub zero_count_int: Option<u64>,
    /// Runs of consecutive positive buckets.
    #[prost(message, repeated, tag = "11")]
    pub positive_spans: Vec<BucketSpan>,
    /// The positive buckets' counts, each as the difference from the previous bucket's
    /// (the first from zero).
    #[prost(sint64, repeated, tag = "12")]
    pub positive_deltas: Vec<i64>,
    /// `ResetHint`: 0 unknown (Prometheus detects counter resets itself).
    #[prost(int32, tag = "14")]
    pub reset_hint: i32,
    /// Milliseconds since the Unix epoch.
    #[prost(int64, tag = "15")]
    pub timestamp: i64,
}

/// `prometheus.BucketSpan`: `length` consecutive buckets, starting `offset` buckets after
/// the end of the previous span (the first: at bucket index `offset`).
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct BucketSpan {
    /// Gap before the span.
    #[prost(sint32, tag = "1")]
    pub offset: i32,
    /// Buckets in the span.
    #[prost(uint32, tag = "2")]
    pub length: u32,
}

/// The HTTP body of a push: protobuf, then snappy (block format, as remote write wants).
pub fn encode(req: &WriteRequest) -> Vec<u8> {
    let raw = prost::Message::encode_to_vec(req);
    snap::raw::Encoder::new()
        .compress_vec(&raw)
        .expect("snappy compresses any input held in memory")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_round_trips_through_snappy_and_protobuf() {
        let req = WriteRequest {
            timeseries: vec![TimeSeries {
                labels: vec![Label {
                    name: "__name__".into(),
                    value: "loadlab_requests_total".into(),
                }],
                samples: vec![Sample {
                    value: 1234.0,
                    timestamp: 1_700_000_000_000,
                }],
                histograms: vec![Histogram {
                    count_int: Some(3),
                    sum: 0.5,
                    schema: 3,
                    zero_threshold: 1e-9,
                    zero_count_int: Some(0),
                    positive_spans: vec![BucketSpan {
                        offset: -20,
                        length: 2,
                    }],
                    positive_deltas: vec![1, 1],
                    reset_hint: 0,
                    timestamp: 1_700_000_000_000,
                }],
            }],
        };
        let body = encode(&req);
        let raw = snap::raw::Decoder::new().decompress_vec(&body).unwrap();
        let back: WriteRequest = prost::Message::decode(&raw[..]).unwrap();
        assert_eq!(back, req);
    }

    /// Field numbers and wire types, checked against bytes written from the `.proto`: a
    /// sample `{value: 1.0, timestamp: 2}` is field 1 (fixed64) then field 2 (varint); a
    /// span `{offset: -1, length: 3}` is field 1 zigzag (sint32: -1 is 1) then field 2.
    #[test]
    fn field_numbers_are_the_protos() {
        let s = prost::Message::encode_to_vec(&Sample {
            value: 1.0,
            timestamp: 2,
        });
        assert_eq!(s, [0x09, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0x10, 0x02]);
        let span = prost::Message::encode_to_vec(&BucketSpan {
            offset: -1,
            length: 3,
        });
        assert_eq!(span, [0x08, 0x01, 0x10, 0x03]);
        let h = prost::Message::encode_to_vec(&Histogram {
            count_int: Some(0),
            positive_deltas: vec![-1],
            ..Histogram::default()
        });
        // count_int present even at 0 (a oneof member), deltas packed zigzag (-1 is 1).
        assert_eq!(h, [0x08, 0x00, 0x62, 0x01, 0x01]);
    }
}

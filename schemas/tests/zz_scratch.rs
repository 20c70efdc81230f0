use kadence_schemas::ExecutorBeat;
use kadence_schemas::codec::decode;
#[test]
fn big_array() {
    // executor_id "e", app "a", host "h", version "v", then handlers array count 16_000_000
    let mut b = vec![0u8, 0, 0, 0x0F, 0xA1];
    for s in [b"e", b"a", b"h", b"v"] {
        b.push(2);
        b.extend_from_slice(s);
    }
    let mut z = (16_000_000u64) << 1;
    while z > 0x7f {
        b.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
    b.push(z as u8);
    b.extend_from_slice(&[2, b'x']);
    let t = std::time::Instant::now();
    let r = decode::<ExecutorBeat>(&b);
    eprintln!(
        "{:?} {:?} sizeof={}",
        r.map(|_| ()),
        t.elapsed(),
        std::mem::size_of::<apache_avro::types::Value>()
    );
}

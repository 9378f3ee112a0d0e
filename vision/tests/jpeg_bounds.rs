//! A JPEG whose header declares more pixels than its bytes can hold is refused before anything
//! is allocated for those pixels (a 236-byte file declaring 8192x8192 would otherwise cost 207 MB).
//!
//! A counting global allocator measures the peak heap growth while the frame is checked and
//! converted; this file holds only these tests so nothing else allocates meanwhile.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use camdnn_vision::{jpeg_min_bytes, Frame, PixelFormat, VisionError};
use jpeg_encoder::{ColorType, Encoder};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Peak heap growth (bytes) while `f` runs.
fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = f();
    (out, PEAK.load(Ordering::Relaxed) - base)
}

/// An 8x8 grey JPEG whose SOF0 header is patched to declare `w` x `h`.
fn lying_jpeg(w: u16, h: u16) -> Vec<u8> {
    let mut out = Vec::new();
    Encoder::new(&mut out, 50)
        .encode(&[128u8; 64], 8, 8, ColorType::Luma)
        .unwrap();
    let sof = out
        .windows(2)
        .position(|m| m == [0xFF, 0xC0])
        .expect("baseline JPEG has SOF0");
    out[sof + 5..sof + 7].copy_from_slice(&h.to_be_bytes());
    out[sof + 7..sof + 9].copy_from_slice(&w.to_be_bytes());
    out
}

#[test]
fn tiny_jpeg_declaring_8192_squared_is_refused_without_allocating_the_image() {
    let data = lying_jpeg(8192, 8192);
    assert!(
        data.len() < 1024,
        "the hostile file is {} bytes",
        data.len()
    );
    let len = data.len();
    let (res, peak) = peak_during(|| {
        Frame::new(8192, 8192, PixelFormat::Jpeg, data).and_then(|f| f.to_rgb().map(|_| ()))
    });
    match res {
        Err(VisionError::Jpeg(m)) => {
            assert!(
                m.contains("8192x8192") && m.contains(&format!("{len} bytes")),
                "{m}"
            );
            assert!(m.contains(&jpeg_min_bytes(8192, 8192).to_string()), "{m}");
        }
        other => panic!("a {len}-byte JPEG declaring 8192x8192 was not refused: {other:?}"),
    }
    assert!(
        peak < 1 << 20,
        "refusing it allocated {peak} bytes at peak (the image would be 192 MiB)"
    );
}

#[test]
fn the_bound_accepts_real_files_and_refuses_lies_of_every_size() {
    // Real encodings are far above the bound, even a flat image at low quality.
    for (w, h) in [(8u32, 8u32), (64, 48), (640, 480)] {
        let mut out = Vec::new();
        Encoder::new(&mut out, 1)
            .encode(
                &vec![7u8; (w * h) as usize],
                w as u16,
                h as u16,
                ColorType::Luma,
            )
            .unwrap();
        assert!(out.len() as u64 >= jpeg_min_bytes(w, h), "{w}x{h}");
        assert!(Frame::new(w, h, PixelFormat::Jpeg, out).is_ok(), "{w}x{h}");
    }
    // The same tiny file declaring more and more pixels is refused once it cannot hold them.
    let e = Frame::jpeg(lying_jpeg(4096, 4096)).unwrap_err();
    assert!(e.to_string().contains("4096x4096"), "{e}");
    assert_eq!(jpeg_min_bytes(8192, 8192), 131_072);
    assert_eq!(jpeg_min_bytes(1, 1), 1);
}

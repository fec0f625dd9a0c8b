import CLnoteCairo
import LnoteModel

/// A cairo surface and its drawing context, owned together and released exactly once.
///
/// Made for one of three targets: an image surface in memory (ARGB32), or a PDF or SVG
/// surface whose bytes cairo writes through a callback into a `ByteSink` this canvas owns.
/// `close()` finishes the surface (a vector surface writes its last bytes then), checks
/// cairo's status, and releases both handles; `deinit` releases them if `close()` was never
/// called (the output is then incomplete and nobody reads it).
///
/// The write callback never captures: the sink travels as the `void *` closure, unretained,
/// and the canvas keeps the sink alive as long as the surface exists.
final class CairoCanvas {
    /// The `cairo_surface_t *`.
    let surface: OpaquePointer
    /// The `cairo_t *` drawing on `surface`.
    let cr: OpaquePointer
    /// Where a stream surface's bytes go (nil for an image surface).
    let sink: ByteSink?
    private var released = false

    /// Takes ownership of `surface` (already created; its status is checked here).
    private init(surface: OpaquePointer, sink: ByteSink?, what: String) throws {
        let status = cairo_surface_status(surface)
        guard status == CAIRO_STATUS_SUCCESS else {
            cairo_surface_destroy(surface)
            throw CairoCanvas.error(status, "cannot create the \(what) surface")
        }
        guard let cr = cairo_create(surface) else {
            cairo_surface_destroy(surface)
            throw LnoteError(.limitExceeded, "cannot create a cairo context for the \(what) surface")
        }
        let crStatus = cairo_status(cr)
        guard crStatus == CAIRO_STATUS_SUCCESS else {
            cairo_destroy(cr)
            cairo_surface_destroy(surface)
            throw CairoCanvas.error(crStatus, "cannot draw on the \(what) surface")
        }
        self.surface = surface
        self.cr = cr
        self.sink = sink
    }

    deinit { release() }

    private func release() {
        guard !released else { return }
        released = true
        cairo_destroy(cr)
        cairo_surface_destroy(surface)
    }

    /// An ARGB32 image surface of `width` × `height` pixels (1 to 32,767 each, cairo's limit).
    static func image(width: Int, height: Int) throws -> CairoCanvas {
        guard (1...32_767).contains(width), (1...32_767).contains(height) else {
            throw LnoteError(.limitExceeded, "a \(width)x\(height) picture is beyond cairo's 32767 pixels a side")
        }
        return try CairoCanvas(surface: cairo_image_surface_create(CAIRO_FORMAT_ARGB32, Int32(width), Int32(height)),
                               sink: nil, what: "image")
    }

    /// A PDF surface whose first page is `width` × `height` points.
    static func pdf(width: Double, height: Double) throws -> CairoCanvas {
        let sink = ByteSink()
        let s = cairo_pdf_surface_create_for_stream(ByteSink.write, Unmanaged.passUnretained(sink).toOpaque(), width, height)!
        return try CairoCanvas(surface: s, sink: sink, what: "PDF")
    }

    /// An SVG surface of `width` × `height` points (the root's `width`/`height` in `pt`,
    /// its `viewBox` in points).
    static func svg(width: Double, height: Double) throws -> CairoCanvas {
        let sink = ByteSink()
        let s = cairo_svg_surface_create_for_stream(ByteSink.write, Unmanaged.passUnretained(sink).toOpaque(), width, height)!
        return try CairoCanvas(surface: s, sink: sink, what: "SVG")
    }

    /// Throws when the context is in an error state (cairo then ignores every later call).
    func check(_ what: String) throws {
        let status = cairo_status(cr)
        guard status == CAIRO_STATUS_SUCCESS else { throw CairoCanvas.error(status, what) }
    }

    /// Finishes the surface (a stream surface writes its remaining bytes), checks every
    /// status, releases the handles, and returns what a stream surface wrote ([] for an image).
    /// - Throws: `io` or `limitExceeded` naming cairo's status when drawing or writing failed.
    @discardableResult
    func close() throws -> [UInt8] {
        precondition(!released, "CairoCanvas closed twice")
        let drawn = cairo_status(cr)
        cairo_surface_finish(surface)
        let finished = cairo_surface_status(surface)
        let bytes = sink?.bytes ?? []
        release()
        guard drawn == CAIRO_STATUS_SUCCESS else { throw CairoCanvas.error(drawn, "drawing failed") }
        guard finished == CAIRO_STATUS_SUCCESS else { throw CairoCanvas.error(finished, "cannot finish the surface") }
        return bytes
    }

    /// An error for a cairo status: out of memory and invalid sizes are `limitExceeded`, write
    /// failures `io`, anything else `invalidState`; `underlying` holds cairo's own words.
    static func error(_ status: cairo_status_t, _ message: String,
                      file: StaticString = #fileID, line: UInt = #line) -> LnoteError {
        let text = String(cString: cairo_status_to_string(status))
        let code: LnoteError.Code
        switch status {
        case CAIRO_STATUS_NO_MEMORY, CAIRO_STATUS_INVALID_SIZE: code = .limitExceeded
        case CAIRO_STATUS_WRITE_ERROR, CAIRO_STATUS_READ_ERROR: code = .io
        default: code = .invalidState
        }
        return LnoteError(code, message, underlying: "cairo status \(status.rawValue) (\(text))", file: file, line: line)
    }
}

/// Collects the bytes cairo writes through a `cairo_write_func_t`.
final class ByteSink {
    var bytes: [UInt8] = []

    /// The callback: `closure` is an unretained `ByteSink`.
    static let write: cairo_write_func_t = { closure, data, length in
        guard let closure else { return CAIRO_STATUS_WRITE_ERROR }
        let sink = Unmanaged<ByteSink>.fromOpaque(closure).takeUnretainedValue()
        if length > 0, let data {
            sink.bytes.append(contentsOf: UnsafeBufferPointer(start: data, count: Int(length)))
        }
        return CAIRO_STATUS_SUCCESS
    }
}

/// Feeds bytes from memory to a `cairo_read_func_t` (cairo's PNG reader), refusing to read
/// past the end.
final class ByteSource {
    let bytes: [UInt8]
    var offset = 0
    init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// The callback: `closure` is an unretained `ByteSource`. A read past the end is
    /// `CAIRO_STATUS_READ_ERROR` (a truncated file).
    static let read: cairo_read_func_t = { closure, data, length in
        guard let closure, let data else { return CAIRO_STATUS_READ_ERROR }
        let source = Unmanaged<ByteSource>.fromOpaque(closure).takeUnretainedValue()
        let n = Int(length)
        guard n <= source.bytes.count - source.offset else { return CAIRO_STATUS_READ_ERROR }
        source.bytes.withUnsafeBufferPointer { b in
            data.update(from: b.baseAddress! + source.offset, count: n)
        }
        source.offset += n
        return CAIRO_STATUS_SUCCESS
    }
}

extension Thumbnail {
    /// This picture as a PNG file written by cairo (`cairo_surface_write_to_png_stream`).
    /// - Throws: what cairo reports (out of memory).
    public func cairoPNG() throws -> [UInt8] {
        let canvas = try CairoCanvas.image(width: width, height: height)
        let surface = canvas.surface
        cairo_surface_flush(surface)
        let stride = Int(cairo_image_surface_get_stride(surface))
        let data = cairo_image_surface_get_data(surface)!
        // RGBA bytes to ARGB32 (native-endian words, premultiplied).
        pixels.withUnsafeBufferPointer { src in
            for y in 0..<height {
                let row = UnsafeMutableRawPointer(data + y * stride).assumingMemoryBound(to: UInt32.self)
                for x in 0..<width {
                    let i = (y * width + x) * 4
                    let a = UInt32(src[i + 3])
                    @inline(__always) func pm(_ c: UInt8) -> UInt32 { (UInt32(c) * a + 127) / 255 }
                    row[x] = a << 24 | pm(src[i]) << 16 | pm(src[i + 1]) << 8 | pm(src[i + 2])
                }
            }
        }
        cairo_surface_mark_dirty(surface)
        let sink = ByteSink()
        let status = withExtendedLifetime(sink) {
            cairo_surface_write_to_png_stream(surface, ByteSink.write, Unmanaged.passUnretained(sink).toOpaque())
        }
        try canvas.close()
        guard status == CAIRO_STATUS_SUCCESS else { throw CairoCanvas.error(status, "cannot write the PNG") }
        return sink.bytes
    }
}

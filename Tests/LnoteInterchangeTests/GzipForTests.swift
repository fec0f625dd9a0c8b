import CLnoteZlib
import LnoteModel

/// zlib's deflate with a gzip wrapper (16 + MAX_WBITS), for building .xopp test inputs.
enum GzipForTests {
    static func deflate(_ input: [UInt8]) throws -> [UInt8] {
        var stream = z_stream()
        guard deflateInit2_(&stream, 9, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY, ZLIB_VERSION,
                            Int32(MemoryLayout<z_stream>.size)) == Z_OK else { throw LnoteError(.io, "deflateInit2") }
        defer { deflateEnd(&stream) }
        var out = [UInt8](repeating: 0, count: Int(deflateBound(&stream, UInt(input.count))) + 64)
        let produced: Int = try input.withUnsafeBufferPointer { inp in
            try out.withUnsafeMutableBufferPointer { o in
                stream.next_in = UnsafeMutablePointer(mutating: inp.baseAddress)
                stream.avail_in = UInt32(inp.count)
                stream.next_out = o.baseAddress
                stream.avail_out = UInt32(o.count)
                guard CLnoteZlib.deflate(&stream, Z_FINISH) == Z_STREAM_END else { throw LnoteError(.io, "deflate") }
                return o.count - Int(stream.avail_out)
            }
        }
        return Array(out[0..<produced])
    }
}

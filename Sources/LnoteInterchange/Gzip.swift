import CLnoteZlib
import LnoteModel

/// gzip decompression through zlib's inflate, with a bound on what it produces: a small
/// file that inflates past `limit` (a decompression bomb) is refused as it is inflated,
/// before more than `limit` bytes are held ([XCH-7]).
public enum Gzip {
    /// Inflates one or more gzip members (`inflateInit2` with 16 + MAX_WBITS).
    ///
    /// - Throws: `limitExceeded` when the output would pass `limit` bytes (offset: the
    ///   compressed bytes consumed by then), `corrupt` for data zlib refuses, `truncated`
    ///   for input that ends inside a member; each naming `path`.
    public static func inflate(_ input: [UInt8], limit: Int, path: String? = nil) throws -> [UInt8] {
        var out: [UInt8] = []
        var stream = z_stream()
        let windowBits: Int32 = 16 + MAX_WBITS
        guard inflateInit2_(&stream, windowBits, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            throw LnoteError(.io, "zlib inflateInit2 failed", path: path)
        }
        defer { inflateEnd(&stream) }
        let chunk = 1 << 16
        var buffer = [UInt8](repeating: 0, count: chunk)
        try input.withUnsafeBufferPointer { inp in
            stream.next_in = UnsafeMutablePointer(mutating: inp.baseAddress)
            stream.avail_in = UInt32(inp.count)
            while true {
                let (rc, produced) = buffer.withUnsafeMutableBufferPointer { b -> (Int32, Int) in
                    stream.next_out = b.baseAddress
                    stream.avail_out = UInt32(chunk)
                    let rc = CLnoteZlib.inflate(&stream, Z_NO_FLUSH)
                    return (rc, chunk - Int(stream.avail_out))
                }
                let consumed = inp.count - Int(stream.avail_in)
                if produced > 0 {
                    guard out.count + produced <= limit else {
                        throw LnoteError(.limitExceeded, "gzip data inflates to more than \(limit) bytes", path: path, offset: consumed)
                    }
                    out += buffer[0..<produced]
                }
                switch rc {
                case Z_STREAM_END:
                    // Another member may follow (concatenated gzip files are one file).
                    if stream.avail_in == 0 { return }
                    guard inflateReset(&stream) == Z_OK else { throw LnoteError(.io, "zlib inflateReset failed", path: path) }
                case Z_OK:
                    if stream.avail_in == 0 && produced == 0 {
                        throw LnoteError(.truncated, "gzip data ends inside a member", path: path, offset: consumed)
                    }
                case Z_BUF_ERROR:
                    if stream.avail_in == 0 {
                        throw LnoteError(.truncated, "gzip data ends inside a member", path: path, offset: consumed)
                    }
                default:
                    let msg = stream.msg.map { String(cString: $0) } ?? "error \(rc)"
                    throw LnoteError(.corrupt, "gzip data is corrupt: \(msg)", path: path, offset: consumed)
                }
            }
        }
        return out
    }

    /// gzip's magic bytes.
    public static func isGzip(_ bytes: [UInt8]) -> Bool { bytes.count >= 2 && bytes[0] == 0x1F && bytes[1] == 0x8B }
}

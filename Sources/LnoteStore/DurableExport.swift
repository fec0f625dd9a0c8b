/// A durable replace of a file outside a notebook (an export's output): what `DurableFile`
/// does for the notebook's own files ([PKG-20]), for the CLI's writers.
public enum DurableExport {
    /// Replaces (or creates) `path` with `bytes`: temporary file in the same directory,
    /// fsync, rename, fsync of the directory. On failure the old file is left as it was.
    public static func replace(_ path: String, with bytes: [UInt8]) throws {
        try DurableFile.replace(path, with: bytes, io: .live)
    }
}

/// Durable writes of files outside notebooks (exports, pictures): the store's durable
/// replace ([PKG-20]: temp file in the same directory, write, fsync, rename, fsync the
/// directory) through the syscall seam, for callers outside the store.
public enum OutputFile {
    /// Replaces (or creates) `path` with `bytes`, atomically and durably. On failure `path`
    /// is left as it was.
    /// - Throws: `io` naming the path and errno.
    public static func replace(_ path: String, with bytes: [UInt8]) throws {
        try DurableFile.replace(path, with: bytes, io: .live)
    }

    /// Creates the directory `path` if it is missing (its parent must exist), and makes the
    /// creation durable (fsync of the parent).
    /// - Throws: `io`, and `corrupt` when `path` exists and is not a directory.
    public static func makeDirectory(_ path: String) throws {
        let io = Syscalls.live
        if let st = try io.stat(path) {
            guard st.isDirectory else {
                throw Syscalls.notRegular(path, kind: io.fileType(atPath: path) ?? "unknown", wantsDirectory: true)
            }
            return
        }
        try io.mkdir(path, existingOK: true)
        try DurableFile.syncDirectory(DurableFile.split(path).dir, io: io)
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import LnoteModel

/// Many new files made durable together ([PKG-96]): what a first sync writes.
///
/// A durable replace ([PKG-20]) pays a file `fsync` and a directory `fsync` per file; a sync
/// that brings hundreds of documents would pay thousands, each a journal commit. A batch
/// instead writes every file first (into staged directories or under temporary names, all
/// invisible to readers, [PKG-21]), then syncs them, then the directories they were created
/// in, and only then publishes them with renames and one `fsync` per directory the renames
/// changed. Once the first sync of the batch has committed the file system's journal, the
/// others find their data already written: the batch costs about one commit, not one per
/// file.
///
/// A large batch is synced with one `syncfs(2)` instead (same guarantee: every file and
/// directory of the file system durable), which costs one device flush instead of one per file.
///
/// The order is the whole durability argument: nothing is renamed into a name a reader looks
/// at before every byte it holds, and every entry of the staged directories, is durable; a
/// crash before `publish` leaves only invisible temporaries, and one after a rename leaves a
/// whole file or package under its final name.
final class DurableBatch {
    /// Most packages one batch stages (each holds its lock file open until published).
    static let maxPackages = 128

    let io: Syscalls
    /// Files written and not yet synced.
    private var files: [String] = []
    /// Staged directories whose entries were created, in creation order (synced deepest first).
    private var directories: [String] = []
    /// Renames to make once everything is durable: a staged name to its final one.
    private var renames: [(from: String, to: String)] = []
    private(set) var isSynced = false

    init(io: Syscalls) {
        self.io = io
    }

    /// Creates a directory inside something staged, to be synced with the batch.
    func makeDirectory(_ path: String) throws {
        precondition(!isSynced, "a synced batch takes no more writes")
        try io.mkdir(path)
        directories.append(path)
    }

    /// Notes a staged directory created elsewhere whose entries must be synced with the batch.
    func addDirectory(_ path: String) {
        precondition(!isSynced, "a synced batch takes no more writes")
        directories.append(path)
    }

    /// Writes a new file (`O_CREAT|O_EXCL`) under a staged name and starts its writeback;
    /// it is synced by `sync()`.
    func write(_ path: String, _ bytes: [UInt8]) throws {
        precondition(!isSynced, "a synced batch takes no more writes")
        try io.open(path, O_WRONLY | O_CREAT | O_EXCL, mode: 0o644).closing { fd in
            try io.write(fd, bytes)
            // The kernel starts writing now, while the rest of the batch is encoded.
            try io.startWriteback(fd, offset: 0, count: bytes.count)
        }
        files.append(path)
    }

    /// Publishes `from` (a staged file or directory) as `to` once the batch is synced.
    func rename(_ from: String, to: String) {
        renames.append((from, to))
    }

    /// From this many files on, `sync()` makes them durable with one `syncfs(2)` of their
    /// file system rather than one `fsync` each: each `fsync` costs a flush of the device's
    /// cache, while `syncfs` costs one, plus writing whatever else is dirty on that file
    /// system, which for a handful of files may cost more than it saves.
    static let fileSystemSyncThreshold = 16

    /// Makes every file written and every staged directory durable: one `syncfs` of the file
    /// system holding `folder` for a batch of `fileSystemSyncThreshold` files or more (where
    /// the system has it); otherwise each file is synced, then each directory, deepest first
    /// (a directory `fsync` covers the entries it holds, not the files' data).
    ///
    /// - Parameter folder: a directory on the file system of every file of the batch (the
    ///   notebook folder: the renames of `publish` stay inside it).
    func sync(folder: String) throws {
        if files.count >= DurableBatch.fileSystemSyncThreshold {
            if try io.openDirectory(folder).closing({ try io.syncFileSystem($0) }) {
                isSynced = true
                return
            }
        }
        for path in files { try io.open(path, O_RDONLY).closing { try io.fsync($0) } }
        for dir in directories.reversed() { try DurableFile.syncDirectory(dir, io: io) }
        isSynced = true
    }

    /// The renames, in the order given, after `sync()`; then one `fsync` of each directory
    /// they changed.
    ///
    /// A rename whose destination exists already is not made when `rename(2)` refuses it
    /// (a non-empty directory: another process published the same package first); its staged
    /// name is left to the caller, in `refused`.
    func publish() throws -> (done: [(from: String, to: String)], refused: [(from: String, to: String)]) {
        precondition(isSynced, "publish before sync")
        var done: [(from: String, to: String)] = []
        var refused: [(from: String, to: String)] = []
        var parents: [String] = []
        for r in renames {
            do {
                try io.rename(r.from, r.to)
            } catch let e as LnoteError where e.code == .io && e.errnoCode.map({ [ENOTEMPTY, EEXIST, EISDIR].contains($0) }) == true {
                refused.append(r)
                continue
            }
            done.append(r)
            let parent = DurableFile.split(r.to).dir
            if !parents.contains(parent) { parents.append(parent) }
        }
        for dir in parents { try DurableFile.syncDirectory(dir, io: io) }
        return (done, refused)
    }
}

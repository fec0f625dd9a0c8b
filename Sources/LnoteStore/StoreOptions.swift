import Foundation
import LnoteModel

/// How a notebook's documents save, compact and sync to disk.
public struct StoreOptions: Sendable {
    /// Autosave (document.json, manifest.json, pages past the compaction threshold) runs
    /// once edits have paused this long ([PKG-50]).
    public var autosaveDelay: Duration = .milliseconds(500)
    /// ...or at the latest this long after the first unsaved edit, even while edits continue.
    public var autosaveMaxDelay: Duration = .seconds(5)
    /// False: nothing is saved in the background; `flush()` and `close()` still save.
    public var autosave = true
    /// A page's snapshot is rewritten (its log compacted) once its log holds this many
    /// bytes past the offset the snapshot covers ([PKG-41]) ...
    public var compactAfterBytes: UInt64 = 1 << 20
    /// ... or this many frames.
    public var compactAfterFrames = 4096
    /// nil: every append is followed by its own `fdatasync`. Otherwise appends within the
    /// window share one ([PKG-35]).
    public var groupCommit: GroupCommit?
    /// Pages kept in memory per open document (each holds its log open); the least
    /// recently used beyond this are snapshotted if changed and closed.
    public var maxLoadedPages = 64
    /// Wall-clock time in ms since 1970 stamped on local operations (tests pass a fixed clock).
    public var now: @Sendable () -> Int64 = { Int64((Date().timeIntervalSince1970 * 1000).rounded()) }

    /// The replica id a folder gets when it has none yet (created, or opened for the first
    /// time). nil: a random one. Only for replays and tests that need predictable ids
    /// (scenario replica 1, 2, 3 …); two folders writing under one id corrupt each other's
    /// history, so an app never sets it.
    public var newReplicaID: ReplicaID?

    /// How long a writer waits for a document's or the notebook's lock held by another
    /// process (or another handle) before it fails with `invalidState` ([PKG-81]). Locks are
    /// held only around one append, snapshot save, compaction or repair, so a longer wait
    /// means the holder is stuck (stopped with SIGSTOP, a hung disk).
    public var lockTimeout: Duration = .seconds(10)

    /// Events each subscriber of `Document.changes` or `Notebook.changes` may leave unread
    /// before the oldest are dropped (and counted in a `missed` event).
    public var changeBufferCapacity = 1024

    /// How often the store looks at the logs of a document or notebook that has subscribers,
    /// where inotify is not available (no inotify, or no watch left); with inotify it waits
    /// for the kernel's events and uses no CPU between them.
    public var pollInterval: Duration = .milliseconds(250)
    /// Tests only: watch by polling even where inotify works.
    var forcePolling = false

    /// Page thumbnails ([PKG-17], [PKG-103]): a save or a merge marks the pages whose
    /// picture is stale, and a background task renders them into `thumbnails/<page>.jpg`
    /// after the save, off the edit path. False: nothing is rendered in the background nor
    /// at close (the pictures on disk go stale); `Document.thumbnail(page:)` still renders a
    /// fresh one on demand, and `lnote verify --repair` rebuilds them.
    public var thumbnails = true
    /// How long the background renderer waits once pages were marked before it renders
    /// them: marks made meanwhile (an autosave after each burst of strokes) coalesce into
    /// one picture per page, and the caller of the save gets the processor first (drawing at
    /// once competed with it: lnote-bench case 18). Zero: it starts as soon as the save's
    /// work is done. `close()` does not wait for it.
    public var thumbnailDelay: Duration = .milliseconds(200)
    /// Pages waiting for their picture at most; one more mark drops the oldest waiting page
    /// (its picture stays stale until its next mark, an on-demand `thumbnail(page:)` or a
    /// repair). A page marked again while it waits keeps its place.
    public var thumbnailQueueLimit = 256

    public init() {}
}

import Foundation
import LnoteModel

/// What `Repair.run` did to a notebook folder.
public struct RepairReport: Sendable {
    /// `verify` before the repair.
    public var before: VerifyReport
    /// `verify` after it: what is left is what no rebuild can fix (a person or a peer must).
    public var after: VerifyReport
    /// One line per thing done, in the order done.
    public var actions: [String] = []
}

/// `lnote verify --repair`: rebuilds what can be rebuilt from what the folder holds, through
/// the same code paths an app's open and save take, and says what it did:
/// - torn log tails cut, damaged logs salvaged (their damaged file kept aside), snapshots
///   that do not pair with their log set aside ([PKG-37], [PKG-38], [PKG-47]) — opening each
///   page under the document lock does this, and every log is then scanned whole, so that
///   damage before what a snapshot or document.json covers (which an open does not read) is
///   salvaged as well;
/// - snapshots rewritten from their logs where a log runs past its snapshot;
/// - `manifest.json` rebuilt; thumbnails that are missing, stale or still the `.png` of an
///   older lnote rendered as `thumbnails/<page>.jpg` ([PKG-103]);
/// - temporary files and orphan assets removed (closing each document).
/// Nothing the logs hold is dropped: operations missing from a log stay listed until a peer
/// sends them ([PKG-51]).
public enum Repair {
    public static func run(folder: String) async throws -> RepairReport {
        let before = try Verify.run(folder: folder)
        var actions: [String] = []
        let notebook = try await Notebook.open(at: folder)
        do {
            for id in try await notebook.documentIDs() {
                let d: Document
                do {
                    d = try await notebook.openDocument(id)
                } catch {
                    actions.append("document \(id): cannot be opened, left as it is: \(Self.words(error))")
                    continue
                }
                do {
                    // [PKG-38] Damage an open does not read (before what document.json or a
                    // page's snapshot covers) is salvaged too: the whole logs are scanned.
                    // Salvages said here are not said again with the open's reports below.
                    var said: [String] = []
                    do {
                        if let r = try await d.salvageWholeDocumentLog() {
                            said.append(r.description)
                            actions.append("document \(id): document.log salvaged (damage before what document.json covers): \(r)")
                        }
                    } catch {
                        actions.append("document \(id): document.log left as it is: \(Self.words(error))")
                    }
                    let documentPages = await d.allPageIDs
                    // The logs of pages whose addPage has not arrived ([SYNC-84]) too: salvaged,
                    // then closed (nothing else to repair there).
                    var pageLogs: [PageID] = []
                    do {
                        pageLogs = try await d.pageLogs()
                    } catch {
                        actions.append("document \(id): its page logs could not be listed, only its pages' are scanned: \(Self.words(error))")
                    }
                    for pid in pageLogs where !documentPages.contains(pid) {
                        do {
                            if let r = try await d.salvageWholeLog(page: pid) {
                                said.append(r.description)
                                actions.append("document \(id) page \(pid): log salvaged (a page still waiting for its addPage): \(r)")
                            }
                            try await d.closePage(pid)
                        } catch {
                            actions.append("document \(id) page \(pid): log left as it is: \(Self.words(error))")
                        }
                    }
                    for pid in documentPages {
                        // One page that cannot be repaired is said and left; the others go on.
                        do {
                            let salvaged = try await d.salvageWholeLog(page: pid)
                            if let r = salvaged {
                                said.append(r.description)
                                actions.append("document \(id) page \(pid): log salvaged (damage before what its snapshot covers): \(r)")
                            }
                            let c = try await d.compactReporting(page: pid)
                            if c.written && salvaged != nil {
                                // Every frame of a rewritten log is past the old snapshot's offset.
                                actions.append("document \(id) page \(pid): snapshot rewritten for the salvaged log")
                            } else if c.written {
                                actions.append("document \(id) page \(pid): snapshot rewritten from its log (\(c.frames) operation\(c.frames == 1 ? "" : "s") past it)")
                            }
                            // [PKG-103] Missing, stale or still the PNG of an older lnote: drawn again.
                            switch try await d.refreshThumbnail(page: pid) {
                            case .fresh: break
                            case .missing: actions.append("document \(id) page \(pid): thumbnail rendered (there was none)")
                            case .stale: actions.append("document \(id) page \(pid): thumbnail rendered again (it showed another state of the page)")
                            case .legacyPNG: actions.append("document \(id) page \(pid): thumbnail rendered as JPEG, its old PNG removed")
                            }
                            try await d.closePage(pid)
                        } catch {
                            actions.append("document \(id) page \(pid): left as it is: \(Self.words(error))")
                        }
                    }
                    try await d.flush()
                    for r in await d.recoveryReports where !r.isClean && !said.contains(r.description) {
                        actions.append("document \(id): \(r)")
                    }
                    try await d.close()
                } catch {
                    try? await d.close()
                    throw error
                }
            }
            try await notebook.close()
        } catch {
            try? await notebook.close()
            throw error
        }
        let after = try Verify.run(folder: folder)
        // What closing and saving fixed without saying so (manifests, temporary files, orphans).
        let fixed = Set(before.problems.map(\.description)).subtracting(after.problems.map(\.description))
        for p in before.problems where fixed.contains(p.description) && !actions.contains(where: { $0.contains(p.path) }) {
            actions.append("fixed: \(p.description)")
        }
        return RepairReport(before: before, after: after, actions: actions)
    }

    /// An error's message with its file, without the library's code name.
    static func words(_ error: any Error) -> String {
        guard let e = error as? LnoteError else { return "\(error)" }
        let reason = e.underlying.map { u in e.message.contains(u) ? "" : ": \(u)" } ?? ""
        return e.message + (e.path.map { " (\($0))" } ?? "") + reason
    }
}

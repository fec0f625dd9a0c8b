import Foundation
import LnoteModel

/// Errors as people read them: what happened, where (the file, and for binary data the byte
/// offset), why (the system's reason), and what to do next — never the library's internal
/// code names (`notFound:`, `invalidState:`, …), which `LnoteError.description` keeps for
/// logs and tests.
extension LnoteError {
    var forPeople: String {
        var s = lead + (message.isEmpty ? fallback : message)
        var place: [String] = []
        if let path, !message.contains(path) { place.append(path) }
        if let offset { place.append("byte offset \(offset)") }
        if let index { place.append("record \(index)") }
        if !place.isEmpty { s += " (" + place.joined(separator: ", ") + ")" }
        // (Not when the message already says it: an HTTP status is both.)
        if let underlying, !underlying.isEmpty, !message.contains(underlying) { s += ": \(underlying)" }
        if let hint { s += ". " + hint }
        return s
    }

    /// Words that say what kind of failure it is, where the message alone may not.
    private var lead: String {
        switch code {
        case .truncated: "incomplete data: "
        case .corrupt: "damaged data: "
        case .limitExceeded: "too large: "
        case .database: "database error: "
        case .unauthorized: "refused (unauthorized): "
        // (Not when the message says what the remote did: it speaks the protocol, badly.)
        case .protocolMismatch: message.hasPrefix("remote ") || message.hasPrefix("the remote ") ? ""
            : "the other side speaks another version of the sync protocol: "
        case .network, .ambiguous, .unsupportedVersion, .invalidArgument, .notFound, .alreadyExists, .io, .invalidState: ""
        }
    }

    private var fallback: String {
        switch code {
        case .notFound: "not found"
        case .alreadyExists: "already exists"
        case .io: "cannot read or write"
        case .invalidState: "cannot do this now"
        case .invalidArgument: "invalid argument"
        default: "failed"
        }
    }

    /// What to do next, when the failure itself does not say it.
    private var hint: String? {
        let text = (message + " " + (underlying ?? "")).lowercased()
        switch code {
        case .corrupt where !text.contains("remove it"), .truncated where !text.contains("remove it"):
            // A notebook's own files (in a package `<UUID>.lnote/` or the `.lnote/` folder)
            // are what verify checks; a damaged file given to a command (an import) is not.
            if let path, path.contains("http://") || path.contains("https://") {
                return "The server's answer is damaged: nothing of it was stored; if it happens again, the server's operator should look at it"
            }
            guard path.map({ $0.contains(".lnote") }) ?? true else {
                return "The file itself is damaged: use an intact copy of it"
            }
            return "`lnote verify FOLDER` lists what is damaged; `lnote verify FOLDER --repair` rebuilds what can be rebuilt"
        case .network where text.contains("server_error"):
            return "The server failed: its operator finds the incident in its log; the next sync carries on where this one stopped"
        case .network where text.contains("cannot start http server"):
            return "Another program may be using that port: stop it, or choose another with --port"
        case .network:
            return "Check that the server is running and the URL is right; the next sync carries on where this one stopped"
        case .unauthorized:
            return "Check the token (--token, $LNOTE_TOKEN or the saved remote's), or ask the server's owner for a new one"
        case .invalidState where text.contains("another process") || text.contains("'s lock"):
            // (Not any "lock": a message about a clock is not about a lock held.)
            return "Another lnote (a serve, a sync --watch, an app) is using it: stop that one, or wait and try again"
        case .io where text.contains("no space"):
            return text.contains("taken back") ? "Free some space and try again"
                : "Free some space and try again: nothing already stored was changed"
        // (Not when the message already says what to do: a log that may not be written.)
        case .io where text.contains("read-only file system") && !text.contains("writable place"):
            return "The folder is on read-only media: lnote can show, verify and sync from it, not write to it; "
                + "copy it to a writable place to change it"
        case .io where text.contains("permission denied") && !text.contains("writable place"):
            return "Check the permissions of that file or folder"
        default:
            return nil
        }
    }
}

/// Any error as people read it: an `LnoteError` by `forPeople`, a Foundation error by its
/// localized description (never the raw `Error Domain=… Code=…` dump).
func describeForPeople(_ error: any Error) -> String {
    if let e = error as? LnoteError { return e.forPeople }
    if let e = error as? CLIError { return e.description }
    if let e = error as? Arguments.UsageError { return e.message }
    let ns = error as NSError
    if ns.domain == NSCocoaErrorDomain || ns.domain == NSPOSIXErrorDomain {
        var s = ns.localizedDescription
        if let u = ns.userInfo[NSUnderlyingErrorKey] as? NSError, u.domain == NSPOSIXErrorDomain,
           let code = POSIXErrorCode(rawValue: Int32(u.code)) {
            s += ": " + String(cString: strerror(code.rawValue))
        }
        return s
    }
    return "\(error)"
}

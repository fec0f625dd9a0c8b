import CLnoteSyscalls
import Foundation

/// The name the kernel shows for a thread (`top -H`, `/proc/PID/task/TID/comm`, debuggers).
///
/// Set by the thread itself, first thing in its body, with `pthread_setname_np` directly
/// (through `CLnoteSyscalls`: Glibc's Swift module leaves it out without `_GNU_SOURCE`).
/// Foundation's `Thread.name` cannot be relied on for that on Linux: set before `start()`,
/// the new thread never gets it; set from inside the thread, the setter names the thread
/// only if `start()` on the creating thread has already stored the new thread's handle,
/// which races with the new thread's first instructions. A thread that loses that race
/// keeps its creator's name (say, a Dispatch worker's), silently.
public enum ThreadName {
    /// Linux keeps at most 15 bytes of a thread's name.
    public static let maxBytes = 15

    /// Names the calling thread. A name longer than `maxBytes` is cut at a character
    /// boundary. Throws nothing: a thread's name is a debugging aid, never a reason to fail.
    public static func setCurrent(_ name: String) {
        let utf8 = Array(name.utf8)
        // Cut where a character starts: the byte after the cut is not a continuation byte.
        var end = min(utf8.count, maxBytes)
        while end > 0, end < utf8.count, utf8[end] & 0xC0 == 0x80 { end -= 1 }
        var bytes = Array(utf8[..<end])
        bytes.append(0)
        bytes.withUnsafeBufferPointer { p in
            p.baseAddress!.withMemoryRebound(to: CChar.self, capacity: p.count) { c in
                _ = lnote_set_thread_name(c)
            }
        }
    }

    /// The calling thread's name as the kernel holds it, or nil if it cannot be read.
    public static var current: String? {
        var buffer = [CChar](repeating: 0, count: 64)
        guard lnote_get_thread_name(&buffer, Int32(buffer.count)) == 0 else { return nil }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

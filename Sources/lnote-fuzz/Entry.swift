import Foundation
import LnoteFuzzing

// Built by scripts/fuzz.sh with `-sanitize=fuzzer,address -D LNOTE_FUZZ`: libFuzzer's driver
// runs the target named by LNOTE_FUZZ_TARGET.
// Built normally: `lnote-fuzz TARGET FILE…` replays files (a corpus, a crash) through a target.

#if LNOTE_FUZZ
nonisolated(unsafe) var fuzzTarget = "frame"

@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(_ argc: UnsafeMutablePointer<Int32>,
                         _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
                         _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32) -> Int32

/// SwiftPM links an executable's entry point as `<module>_main`; here it hands over to
/// libFuzzer's driver (libFuzzer's own `main` is then not linked).
@_cdecl("lnote_fuzz_main")
public func fuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    fuzzTarget = ProcessInfo.processInfo.environment["LNOTE_FUZZ_TARGET"] ?? "frame"
    guard FuzzTargets.names.contains(fuzzTarget) else {
        FileHandle.standardError.write(Data("unknown LNOTE_FUZZ_TARGET \(fuzzTarget)\n".utf8))
        return 2
    }
    var count = argc
    var vector: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = argv
    return LLVMFuzzerRunDriver(&count, &vector) { data, size in fuzzOne(data, size) }
}

/// libFuzzer's entry point for one input (its driver refers to it by name).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    FuzzTargets.run(fuzzTarget, size == 0 ? [] : Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}
#else
@main
struct Replay {
    static func main() {
        let args = Array(CommandLine.arguments.dropFirst())
        guard args.count >= 1, FuzzTargets.names.contains(args[0]) else {
            FileHandle.standardError.write(Data("usage: lnote-fuzz TARGET FILE…  (targets: \(FuzzTargets.names.joined(separator: ", ")))\n".utf8))
            exit(2)
        }
        for path in args.dropFirst() {
            guard let bytes = FileManager.default.contents(atPath: path) else {
                FileHandle.standardError.write(Data("cannot read \(path)\n".utf8))
                exit(1)
            }
            FuzzTargets.run(args[0], Array(bytes))
        }
        print("\(args.count - 1) inputs replayed through \(args[0]): no crash")
    }
}
#endif

// lnote-bench: the benchmark program (see BENCHMARKS.md).
//
//     swift run -c release lnote-bench [--quick] [--runs N] [--only N[,M...]] [--json FILE] [--strokes FILE.jsonl]
import Foundation

let options: BenchOptions
do {
    options = try BenchOptions.parse(Array(CommandLine.arguments.dropFirst()))
} catch is HelpRequested {
    print(BenchOptions.usage)
    exit(0)
} catch {
    FileHandle.standardError.write(Data("lnote-bench: \(error)\n\(BenchOptions.usage)\n".utf8))
    exit(2)
}

if options.codec { exit(CodecBench.run(options)) }
if let loop = options.codecLoop { exit(CodecBench.loop(loop, options)) }

if let profile = options.openLoop {
    do {
        let bench = try Bench(options)
        exit(await bench.openLoop(profile))
    } catch {
        FileHandle.standardError.write(Data("lnote-bench: \(error)\n".utf8))
        exit(1)
    }
}

if let child = options.child {
    if child.first == "append" { exit(await ConcurrentAppendChild.run(child)) }
    exit(await Child.run(child))
}

do {
    let bench = try Bench(options)
    exit(await bench.run())
} catch {
    FileHandle.standardError.write(Data("lnote-bench: \(error)\n".utf8))
    exit(1)
}

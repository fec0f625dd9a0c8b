// swift-tools-version:6.0
// lnote: flat-file handwriting notebooks that replicate.
//
// Layers, each depending only on those above it:
//   LnoteModel        pure values and codecs (ids, clocks, strokes, pages, snapshots, JSON);
//                     CLnoteCRC32C gives it the processor's CRC32 instruction
//   LnoteReplication  pure: operations, their frame codec, the deterministic merge
//   LnoteRender       page pictures: thumbnails, raster, PDF and SVG (cairo, libjpeg-turbo)
//   LnoteInterchange  ink in and out: InkML read and written, Xournal++ .xopp (gzip through
//                     zlib, XML through libxml2's SAX parser) and JSON lines split into pages,
//                     all quantized as JSON lines are
//   LnoteStore        disk: notebook folders, .lnote packages, logs, the syscall seam
//   LnoteSQLite       a small Swift wrapper over libsqlite3 (relay store, export, baseline)
//   LnotePostgres     a small Swift wrapper over libpq (the relay's PostgreSQL store)
//   LnoteExport       `lnote export --sqlite`: a notebook as one verified SQLite file
//   LnoteSync         the wire protocol, the libcurl client, folder and HTTP remotes
//   LnoteServer       libmicrohttpd serving: peer server and relay (its storage behind
//                     RelayDatabase, SQLite's built in)
//   LnoteRelayPostgres the relay's PostgreSQL backend (RelayDatabase over LnotePostgres)
//   lnote             the CLI: argument parsing and printing only
import PackageDescription

let package = Package(
    name: "lnote",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "LnoteModel", targets: ["LnoteModel"]),
        .library(name: "LnoteReplication", targets: ["LnoteReplication"]),
        .library(name: "LnoteStore", targets: ["LnoteStore"]),
        .library(name: "LnoteSync", targets: ["LnoteSync"]),
        .library(name: "LnoteServer", targets: ["LnoteServer"]),
        .executable(name: "lnote", targets: ["lnote"]),
        .executable(name: "lnote-bench", targets: ["lnote-bench"]),
    ],
    targets: [
        // C libraries from Debian, one system-library target each, with typed shims
        // for the variadic functions Swift cannot call.
        .systemLibrary(name: "CLnoteSQLite", pkgConfig: "sqlite3",
                       providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CLnoteCurl", pkgConfig: "libcurl",
                       providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CLnoteMicroHTTPD", pkgConfig: "libmicrohttpd",
                       providers: [.apt(["libmicrohttpd-dev"])]),
        // zlib: thumbnails' PNG compression, and the benchmark's "zlib of the naive encoding".
        .systemLibrary(name: "CLnoteZlib", pkgConfig: "zlib",
                       providers: [.apt(["zlib1g-dev"])]),
        // libpq: the PostgreSQL client for the relay's PostgreSQL store (issue 17).
        .systemLibrary(name: "CLnotePQ", pkgConfig: "libpq",
                       providers: [.apt(["libpq-dev"])]),
        // cairo: page rendering, raster and vector (PDF, SVG); issue 19.
        .systemLibrary(name: "CLnoteCairo", pkgConfig: "cairo",
                       providers: [.apt(["libcairo2-dev"])]),
        // libxml2: the SAX parser of InkML and Xournal++ import (XML_PARSE_HUGE, no recovery).
        .systemLibrary(name: "CLnoteXML2", pkgConfig: "libxml-2.0",
                       providers: [.apt(["libxml2-dev"])]),
        // libjpeg-turbo's TurboJPEG: JPEG thumbnails and JPEG image assets; issue 19.
        .systemLibrary(name: "CLnoteJPEG", pkgConfig: "libturbojpeg",
                       providers: [.apt(["libturbojpeg0-dev"])]),

        // The processor's CRC32 instruction for LnoteModel's CRC-32C (plain C, no library).
        .target(name: "CLnoteCRC32C"),
        // System calls Glibc's Swift module does not export (sync_file_range), for the store.
        .target(name: "CLnoteSyscalls"),

        .target(name: "LnoteModel", dependencies: ["CLnoteCRC32C"]),
        .target(name: "LnoteReplication", dependencies: ["LnoteModel"]),
        .target(name: "LnoteRender", dependencies: ["LnoteModel", "CLnoteZlib", "CLnoteCairo", "CLnoteJPEG"]),
        .target(name: "LnoteInterchange", dependencies: ["LnoteModel", "CLnoteZlib", "CLnoteXML2"]),
        .target(name: "LnoteStore", dependencies: ["LnoteModel", "LnoteReplication", "LnoteRender", "CLnoteSyscalls"]),
        .target(name: "LnoteSQLite", dependencies: ["LnoteModel", "CLnoteSQLite"]),
        .target(name: "LnotePostgres", dependencies: ["LnoteModel", "CLnotePQ"]),
        .target(name: "LnoteSync", dependencies: ["LnoteModel", "LnoteReplication", "LnoteStore", "CLnoteCurl"]),
        .target(name: "LnoteServer", dependencies: ["LnoteModel", "LnoteReplication", "LnoteRender", "LnoteStore", "LnoteSync", "LnoteSQLite", "CLnoteMicroHTTPD"]),
        // The relay's PostgreSQL backend (issue 17): RelayDatabase over LnotePostgres.
        .target(name: "LnoteRelayPostgres", dependencies: ["LnoteModel", "LnotePostgres", "LnoteServer", "LnoteStore"]),
        .target(name: "LnoteExport", dependencies: ["LnoteModel", "LnoteReplication", "LnoteStore", "LnoteSQLite"]),
        .target(name: "LnoteScenario", dependencies: ["LnoteModel", "LnoteReplication", "LnoteStore", "LnoteSync", "LnoteServer"]),
        .executableTarget(name: "lnote", dependencies: ["CLnoteSyscalls", "LnoteModel", "LnoteInterchange", "LnoteReplication", "LnoteRender", "LnoteStore", "LnoteSync", "LnoteServer", "LnoteSQLite", "LnoteScenario", "LnoteExport", "LnotePostgres", "LnoteRelayPostgres"]),
        // A writer that the store's crash tests kill with SIGKILL.
        .target(name: "LnoteFuzzing", dependencies: ["LnoteModel", "LnoteReplication", "LnoteStore", "LnoteSync"]),
        .executableTarget(name: "lnote-fuzz", dependencies: ["LnoteFuzzing"]),
        .executableTarget(name: "lnote-crashtest", dependencies: ["LnoteModel", "LnoteReplication", "LnoteStore"]),
        .executableTarget(name: "two-machines", dependencies: ["LnoteModel", "LnoteReplication", "LnoteStore", "LnoteSync", "LnoteServer"],
                          path: "Examples/TwoMachines"),
        // Load with restarts (scripts/load.sh): clients syncing with an `lnote relay` that is SIGKILLed.
        .executableTarget(name: "lnote-load", dependencies: ["LnoteModel", "LnoteReplication", "LnoteStore", "LnoteSync", "LnoteSQLite", "LnotePostgres", "CLnotePQ", "LnoteTestSupport"]),
        // Writes RELIABILITY.md from the rows the reliability runs recorded (scripts/reliability.sh).
        .executableTarget(name: "lnote-reliability"),
        .executableTarget(name: "lnote-bench", dependencies: ["LnoteModel", "LnoteReplication", "LnoteRender", "LnoteStore", "LnoteSync", "LnoteServer", "LnoteSQLite", "CLnoteZlib", "LnotePostgres", "CLnotePQ", "LnoteRelayPostgres", "LnoteTestSupport"]),

        // Helpers shared by test targets (child processes without blocking Swift's threads).
        .target(name: "LnoteTestSupport", path: "Tests/LnoteTestSupport"),
        .testTarget(name: "LnoteModelTests", dependencies: ["LnoteModel", "LnoteTestSupport"], exclude: ["Fixtures"]),
        .testTarget(name: "LnoteReplicationTests", dependencies: ["LnoteModel", "LnoteReplication", "LnoteTestSupport"]),
        .testTarget(name: "LnoteInterchangeTests", dependencies: ["LnoteModel", "LnoteInterchange", "CLnoteZlib"]),
        .testTarget(name: "LnoteRenderTests", dependencies: ["LnoteModel", "LnoteRender", "LnoteStore", "CLnoteZlib", "CLnoteJPEG"]),
        .testTarget(name: "LnoteStoreTests", dependencies: ["LnoteModel", "LnoteReplication", "LnoteStore", "LnoteTestSupport"]),
        .testTarget(name: "LnoteScenarioTests", dependencies: ["LnoteModel", "LnoteReplication", "LnoteStore", "LnoteSync", "LnoteServer", "LnoteScenario", "LnoteTestSupport"]),
        .testTarget(name: "LnoteSyncTests", dependencies: ["LnoteModel", "LnoteReplication", "LnoteSync", "LnoteScenario", "LnoteFuzzing", "LnoteTestSupport"]),
        .testTarget(name: "ExamplesTests", dependencies: ["two-machines", "LnoteTestSupport"]),
        .testTarget(name: "LnoteEndToEndTests", dependencies: ["LnoteModel", "LnoteReplication", "LnoteStore", "LnoteSync", "LnoteServer", "lnote", "lnote-load", "LnoteTestSupport", "LnotePostgres", "LnoteRelayPostgres"], exclude: ["Fixtures"]),
        .testTarget(name: "LnoteSQLiteTests", dependencies: ["LnoteModel", "LnoteSQLite"]),
        .testTarget(name: "LnotePostgresTests", dependencies: ["LnoteModel", "LnotePostgres", "LnoteTestSupport"]),
        .testTarget(name: "LnoteHTTPTests", dependencies: ["LnoteModel", "LnoteReplication", "LnoteStore", "LnoteSync", "LnoteServer", "LnoteTestSupport"]),
        // Runs the built `lnote` binary as a subprocess (listing it here makes `swift test` build it).
        .testTarget(name: "LnoteCLITests", dependencies: ["lnote", "LnoteModel", "LnoteRender", "LnoteReplication", "LnoteStore", "LnoteTestSupport", "CLnoteZlib", "LnotePostgres", "LnoteRelayPostgres"],
                    exclude: ["Golden"]),
        .testTarget(name: "LnoteExportTests", dependencies: ["LnoteModel", "LnoteReplication", "LnoteStore", "LnoteSQLite", "LnoteExport", "LnoteRender", "lnote", "LnoteTestSupport"]),
        // The read-only web view (issue 19 part 6): serve and relay over HTTP, and headless Chromium.
        .testTarget(name: "LnoteWebViewTests", dependencies: ["LnoteModel", "LnoteReplication", "LnoteRender", "LnoteStore", "LnoteSync", "LnoteServer", "LnoteRelayPostgres", "CLnoteCairo", "LnoteTestSupport"]),
        .testTarget(name: "LnoteRelayTests", dependencies: ["LnoteModel", "LnoteReplication", "LnoteSync", "LnoteServer", "LnoteSQLite", "LnoteTestSupport", "LnotePostgres", "LnoteRelayPostgres"]),
    ],
    swiftLanguageModes: [.v6]
)

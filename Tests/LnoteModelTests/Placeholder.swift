import Testing
import LnoteModel

@Test func crc32cCheckValue() {
    #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
}

import Testing
@testable import SwiftThreads

@Suite struct ErrorTests {
    @Test func clearedErrorIsNone() {
        RLError.clear()
        let e = RLError.last()
        #expect(e.code == .none)
        #expect(e.message == "")
    }
}

// What swift-corelibs-foundation's test files (TestRunLoop.swift,
// TestSocketPort.swift, unchanged: see README.md) see instead of
// Foundation's run loop and ports. They import nothing themselves (their
// project imports Foundation and XCTest once for all files), so the
// imports here are re-exported to every file of this module; the
// typealiases, declared in this module, shadow Foundation's types of the
// same names. Everything else they use — Date, Data, NSData,
// NSMutableArray, NotificationCenter, DispatchQueue, sockaddr_in — is
// Foundation's (and Glibc's, through it).
@_exported import Foundation
@_exported import XCTest
@_exported import SwiftThreads
@_exported import SwiftThreadsFoundation
@_exported import FoundationPortTestSupport

typealias RunLoop = RLRunLoop
typealias Timer = RLTimer
typealias Port = RLPort
typealias PortDelegate = RLPortDelegate
typealias PortMessage = RLPortMessage
typealias SocketPort = RLSocketPort
typealias XCTestCase = RLXCTestCase

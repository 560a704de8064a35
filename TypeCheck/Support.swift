// The app around the corpus: its types and the functions its chains call. Compiled with each
// corpus file (`Scripts/typecheck-corpus`); never run. Sendable-correct under Swift 6.
import Dispatch
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import PromiseHTTP
import Promises

struct Registration: Encodable, Sendable {
  let deviceID: String
}

struct Token: Codable, Sendable {
  let value: String
  let expiresIn: Int
}

struct StreamConfig: Codable, Sendable {
  let ingestURL: String
  let bitrateKbps: Int
  let fps: Int?
  let tags: [String]
}

struct User: Codable, Sendable {
  let id: Int
  let name: String
  let email: String?
  let avatarURL: String?
  let friendIDs: [Int]
  let score: Double

  static let guest = User(id: 0, name: "Guest", email: nil, avatarURL: nil, friendIDs: [], score: 0)
}

struct Avatar: Sendable {
  let url: String
  let bytes: Int
}

struct Settings: Codable, Sendable {
  let theme: String
  let volume: Double
  let muted: Bool
}

enum AppError: Error {
  case notFound
  case badInput(String)
  case expired
}

/// The server the app talks to, and the app's one client.
let configServer = URL(string: "http://127.0.0.1:8080/")!
let client = HTTPClient(baseURL: configServer)

/// The recorder's state belongs to its queue: configure and start it there.
final class Recorder: @unchecked Sendable {
  // Safety: `config`, `isRecording` and `lines` are only accessed on `queue`.
  let queue = DispatchQueue(label: "recorder")
  private(set) var config: StreamConfig?
  private(set) var isRecording = false
  private(set) var lines: [String] = []

  func apply(_ config: StreamConfig) {
    dispatchPrecondition(condition: .onQueue(queue))
    self.config = config
  }

  func start() {
    dispatchPrecondition(condition: .onQueue(queue))
    isRecording = config != nil
  }

  func stop() {
    dispatchPrecondition(condition: .onQueue(queue))
    isRecording = false
  }

  func log(_ line: String) {
    dispatchPrecondition(condition: .onQueue(queue))
    lines.append(line)
  }
}

let recorder = Recorder()

/// A spinner with no state of its own to protect.
final class Spinner: Sendable {
  func show() {}
  func hide() {}
}

let spinner = Spinner()

struct Analytics: Sendable {
  func track(_ event: String, _ properties: [String: String] = [:]) {}
}

let analytics = Analytics()

func log(_ message: String) {}
func showError(_ error: any Error) {}

func fetchUser(_ id: Int) -> Promise<User> {
  Promise(User(id: id, name: "User \(id)", email: nil, avatarURL: nil, friendIDs: [id + 1], score: 0.5))
}

func fetchFriends(of user: User) -> Promise<[User]> {
  Promise.all(user.friendIDs.map(fetchUser))
}

func fetchAvatar(_ user: User) -> Promise<Avatar> {
  Promise(Avatar(url: user.avatarURL ?? "default.png", bytes: 2_048))
}

func fetchSettings() -> Promise<Settings> {
  Promise(Settings(theme: "dark", volume: 0.8, muted: false))
}

func fetchToken(deviceID: String) -> Promise<Token> {
  Promise(Token(value: "token-for-\(deviceID)", expiresIn: 3_600))
}

func loadConfig(from server: String) -> Promise<[String: Int]> {
  server == "primary" ? Promise(error: AppError.notFound) : Promise(["bitrate": 2_500, "fps": 30])
}

func downloadThumbnail(_ name: String) -> Promise<String> {
  name == "missing" ? Promise(error: AppError.notFound) : Promise("\(name).jpg")
}

func fetchUnreadCount() async throws -> Int { 3 }

func parseID(_ text: String) throws -> Int {
  guard let id = Int(text) else { throw AppError.badInput(text) }
  return id
}

func save(_ user: User) throws {}

// The Swift baseline of TypeCheck/Baseline (issue 31): the same sources as values of `Optional`,
// and the library's verbs the standard library lacks, one overload each with the library's
// closure shape. `then`/`compactMap` are `Optional.flatMap`, `map`/`done` are `Optional.map`.
func fetchUserNow(_ id: Int) -> User? { User(id: id, name: "User \(id)", email: nil, avatarURL: nil, friendIDs: [id + 1], score: 0.5) }
func fetchFriendsNow(of user: User) -> [User]? { user.friendIDs.map { User.guest.with(id: $0) } }
func fetchSettingsNow() -> Settings? { Settings(theme: "dark", volume: 0.8, muted: false) }
func fetchAvatarNow(_ user: User) -> Avatar? { Avatar(url: user.avatarURL ?? "default.png", bytes: 2_048) }
func loadConfigNow(from server: String) -> [String: Int]? { server == "primary" ? nil : ["bitrate": 2_500, "fps": 30] }

extension User {
  func with(id: Int) -> User { User(id: id, name: name, email: email, avatarURL: avatarURL, friendIDs: friendIDs, score: score) }
}

extension Optional {
  func validate(_ predicate: (Wrapped) throws -> Bool) rethrows -> Wrapped? {
    try flatMap { try predicate($0) ? $0 : nil }
  }
  func get(_ body: (Wrapped) throws -> Void) rethrows -> Wrapped? {
    try map { try body($0); return $0 }
  }
  func recover(_ body: (any Error) throws -> Wrapped) rethrows -> Wrapped? {
    try self ?? body(AppError.notFound)
  }
  func recoverWith(_ body: (any Error) throws -> Wrapped?) rethrows -> Wrapped? {
    try self ?? body(AppError.notFound)
  }
}

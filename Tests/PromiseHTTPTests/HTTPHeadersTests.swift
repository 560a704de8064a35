import PromiseHTTP
import Testing

@Suite("HTTPHeaders", .timeLimit(.minutes(1)))
struct HTTPHeadersTests {
  @Test func lookupIgnoresCase() {
    let headers: HTTPHeaders = ["Content-Type": "application/json", "X-Count": "1"]
    #expect(headers["content-type"] == "application/json")
    #expect(headers["CONTENT-TYPE"] == "application/json")
    #expect(headers.contains("x-count"))
    #expect(headers["missing"] == nil)
  }

  @Test func settingReplacesEveryFieldOfThatName() {
    var headers = HTTPHeaders([
      (name: "Accept", value: "a"), (name: "X", value: "1"), (name: "accept", value: "b"),
    ])
    headers["ACCEPT"] = "c"
    #expect(headers.values(for: "accept") == ["c"])
    #expect(headers.count == 2)
    headers["x"] = nil
    #expect(headers.count == 1)
  }

  @Test func descriptionsRedactCredentials() {
    let headers: HTTPHeaders = [
      "Authorization": "Bearer s3cret", "Proxy-Authorization": "Basic cHc=", "Cookie": "id=s3cret",
      "Set-Cookie": "id=s3cret", "Accept": "text/plain",
    ]
    var dumped = ""
    dump(headers, to: &dumped)
    for text in [headers.description, headers.debugDescription, String(reflecting: headers), dumped] {
      #expect(!text.contains("s3cret") && !text.contains("cHc="))
      #expect(text.contains("text/plain"))
    }
    #expect(headers["authorization"] == "Bearer s3cret")
  }

  @Test func aDictionaryGivesItsFieldsInNameOrder() {
    let dictionary = ["X-B": "2", "Accept": "*/*", "X-A": "1", "Content-Type": "text/plain"]
    let headers = HTTPHeaders(dictionary)
    #expect(headers.map(\.name) == ["Accept", "Content-Type", "X-A", "X-B"])
  }
}

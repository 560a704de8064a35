// HTTP validation: validate(statusCodes:), validate(contentTypes:), decode, ternary value step.
import PromiseHTTP
import Promises

func chain_43() {
  client.post("device/register", json: Registration(deviceID: "A1B2"))
    .validate(statusCodes: 200..<201)
    .validate(contentTypes: ["application/json"])
    .decode(Token.self)
    .map { token in token.expiresIn > 60 ? token.value : "" }
    .done { bearer in log(bearer.isEmpty ? "token expires too soon" : "got token") }
    .catch { error in showError(error) }
}

// The yardstick of bench/compile_cost: a small use of nlohmann/json (a popular
// header-only library): build a document, dump it, parse it back.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>

int main() {
  nlohmann::json j;
  j["name"] = "ddp";
  j["ranks"] = {1, 2, 3};
  j["lr"] = 0.5;
  j["nested"]["ok"] = true;
  const std::string s = j.dump(2);
  auto k = nlohmann::json::parse(s);
  std::printf("%s %d\n", k["name"].get<std::string>().c_str(), k["ranks"][1].get<int>());
}

// A number for the examples' JSON lines: printf's "nan" and "inf" are not
// JSON (a diverged run would break every reader of the line), so they are null.
#ifndef FASHION_MNIST_JSON_NUMBER_HPP
#define FASHION_MNIST_JSON_NUMBER_HPP

#include <cmath>
#include <cstdio>
#include <string>

inline std::string json_number(double v, int decimals = 6) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

#endif // FASHION_MNIST_JSON_NUMBER_HPP

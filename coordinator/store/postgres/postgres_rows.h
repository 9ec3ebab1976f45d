// Private to the PostgreSQL store's files: a query's rows (freed on every
// path) and a stored JSON record read back.
#pragma once

#include <libpq-fe.h>

#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "util/status.h"

namespace sagad {

// A query's result, freed on every path.
class PgRows {
 public:
  explicit PgRows(PGresult* r) : r_(r) {}
  ~PgRows() {
    if (r_) PQclear(r_);
  }
  PgRows(PgRows&& o) noexcept : r_(o.r_) { o.r_ = nullptr; }
  PgRows(const PgRows&) = delete;
  PgRows& operator=(const PgRows&) = delete;
  int rows() const { return PQntuples(r_); }
  std::string get(int row, int col) const {
    return std::string(PQgetvalue(r_, row, col), PQgetlength(r_, row, col));
  }
  bool null(int row, int col) const { return PQgetisnull(r_, row, col); }
  int64_t i64(int row, int col) const {
    return std::strtoll(PQgetvalue(r_, row, col), nullptr, 10);
  }

 private:
  PGresult* r_;
};

// A JSON record as stored; Internal (naming `what`) if it does not parse.
inline StatusOr<nlohmann::json> ParseStored(const std::string& text, const std::string& what) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return Internal("corrupt record: " + what);
  return j;
}

}  // namespace sagad

// An option that is one of a few named values, read and said through one table per enum: ChoiceTable<E>,
// specialised beside the enum, names the option and each value once. parse_choice reads a name (one of none
// of them is refused, the choices listed); choice_name says a value (/health, the start-up line, the CLI).
#pragma once
#include <iterator>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace tq {

template <class E>
struct NamedValue {
  E value;
  const char* name;
};

// Specialised per enum: `static constexpr const char* option` (its name in messages) and
// `static constexpr NamedValue<E> values[]`; optionally `aliases[]`, older names still read (never said).
template <class E>
struct ChoiceTable;

template <class Table, class = void>
struct HasAliases : std::false_type {};
template <class Table>
struct HasAliases<Table, std::void_t<decltype(Table::aliases)>> : std::true_type {};

template <class E>
E parse_choice(const std::string& name) {
  using Table = ChoiceTable<E>;
  std::string choices;
  const size_t n = std::size(Table::values);
  for (size_t i = 0; i < n; ++i) {
    if (name == Table::values[i].name) return Table::values[i].value;
    choices += std::string(i == 0 ? "" : i + 1 == n ? " or " : ", ") + Table::values[i].name;
  }
  if constexpr (HasAliases<Table>::value)
    for (const auto& alias : Table::aliases)
      if (name == alias.name) return alias.value;
  throw std::invalid_argument(std::string(Table::option) + " must be " + choices + ", got " + name);
}

template <class E>
const char* choice_name(E value) {
  for (const auto& v : ChoiceTable<E>::values)
    if (v.value == value) return v.name;
  return "?";
}

}  // namespace tq

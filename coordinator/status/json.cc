#include "coordinator/status/json.h"

#include <google/protobuf/descriptor.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "absl/strings/str_cat.h"

namespace trl {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

bool NeedsEscape(unsigned char c) { return c < 0x20 || c == '"' || c == '\\'; }

void AppendString(const std::string& text, std::string* out) {
  out->push_back('"');
  // Most strings (names, states, hosts) need no escape: one append.
  if (std::none_of(text.begin(), text.end(),
                   [](unsigned char c) { return NeedsEscape(c); })) {
    out->append(text);
    out->push_back('"');
    return;
  }
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (c < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
          out->append(escaped);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

void AppendDouble(double value, std::string* out) {
  if (std::isnan(value)) {
    out->append("\"NaN\"");
  } else if (std::isinf(value)) {
    out->append(value > 0 ? "\"Infinity\"" : "\"-Infinity\"");
  } else {
    char text[32];
    std::snprintf(text, sizeof(text), "%.17g", value);
    out->append(text);
  }
}

// A message's type: looked up once per repeated field, not per element
// (each GetDescriptor/GetReflection call costs a descriptor-table check).
struct MessageType {
  const google::protobuf::Descriptor* descriptor;
  const Reflection* reflection;
};

void AppendMessage(const Message& message, const MessageType& type, int depth,
                   std::string* out);

void Indent(int depth, std::string* out) {
  out->push_back('\n');
  out->append(2 * depth, ' ');
}

// One value of `field` (element `index` when repeated).
void AppendValue(const Message& m, const Reflection* r,
                 const FieldDescriptor* field, int index, int depth,
                 const MessageType* element_type, std::string* out) {
  const bool rep = field->is_repeated();
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      absl::StrAppend(out, rep ? r->GetRepeatedInt32(m, field, index)
                               : r->GetInt32(m, field));
      break;
    case FieldDescriptor::CPPTYPE_UINT32:
      absl::StrAppend(out, rep ? r->GetRepeatedUInt32(m, field, index)
                               : r->GetUInt32(m, field));
      break;
    case FieldDescriptor::CPPTYPE_INT64:
      absl::StrAppend(
          out, "\"",
          rep ? r->GetRepeatedInt64(m, field, index) : r->GetInt64(m, field),
          "\"");
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      absl::StrAppend(
          out, "\"",
          rep ? r->GetRepeatedUInt64(m, field, index) : r->GetUInt64(m, field),
          "\"");
      break;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      AppendDouble(
          rep ? r->GetRepeatedDouble(m, field, index) : r->GetDouble(m, field),
          out);
      break;
    case FieldDescriptor::CPPTYPE_FLOAT:
      AppendDouble(
          rep ? r->GetRepeatedFloat(m, field, index) : r->GetFloat(m, field),
          out);
      break;
    case FieldDescriptor::CPPTYPE_BOOL:
      out->append(
          (rep ? r->GetRepeatedBool(m, field, index) : r->GetBool(m, field))
              ? "true"
              : "false");
      break;
    case FieldDescriptor::CPPTYPE_ENUM:
      AppendString(rep ? r->GetRepeatedEnum(m, field, index)->name()
                       : r->GetEnum(m, field)->name(),
                   out);
      break;
    case FieldDescriptor::CPPTYPE_STRING:
      AppendString(
          rep ? r->GetRepeatedString(m, field, index) : r->GetString(m, field),
          out);
      break;
    case FieldDescriptor::CPPTYPE_MESSAGE: {
      const Message& value = rep ? r->GetRepeatedMessage(m, field, index)
                                 : r->GetMessage(m, field);
      AppendMessage(value,
                    element_type ? *element_type
                                 : MessageType{value.GetDescriptor(),
                                               value.GetReflection()},
                    depth, out);
      break;
    }
  }
}

void AppendMessage(const Message& message, const MessageType& type, int depth,
                   std::string* out) {
  const auto* descriptor = type.descriptor;
  const Reflection* r = type.reflection;
  out->push_back('{');
  bool first = true;
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* field = descriptor->field(i);
    // An unset message field is left out, as protobuf's own printer does
    // (JobStatus.summary of a whole status).
    if (!field->is_repeated() &&
        field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE &&
        !r->HasField(message, field)) {
      continue;
    }
    if (!first) out->push_back(',');
    first = false;
    Indent(depth + 1, out);
    AppendString(field->name(), out);
    out->append(": ");
    if (field->is_map()) {
      // Map entries: {"key": value, ...}
      const auto* key = field->message_type()->map_key();
      const auto* value = field->message_type()->map_value();
      out->push_back('{');
      const int size = r->FieldSize(message, field);
      for (int e = 0; e < size; ++e) {
        const Message& entry = r->GetRepeatedMessage(message, field, e);
        const Reflection* er = entry.GetReflection();
        if (e > 0) out->push_back(',');
        Indent(depth + 2, out);
        if (key->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
          AppendValue(entry, er, key, 0, depth + 2, nullptr, out);
        } else {
          out->push_back('"');
          std::string number;
          AppendValue(entry, er, key, 0, depth + 2, nullptr, &number);
          if (!number.empty() && number.front() == '"') {
            number = number.substr(1, number.size() - 2);
          }
          out->append(number);
          out->push_back('"');
        }
        out->append(": ");
        AppendValue(entry, er, value, 0, depth + 2, nullptr, out);
      }
      if (size > 0) Indent(depth + 1, out);
      out->push_back('}');
    } else if (field->is_repeated()) {
      out->push_back('[');
      const int size = r->FieldSize(message, field);
      std::optional<MessageType> element_type;
      if (size > 0 && field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        const Message& first = r->GetRepeatedMessage(message, field, 0);
        element_type =
            MessageType{first.GetDescriptor(), first.GetReflection()};
      }
      for (int e = 0; e < size; ++e) {
        if (e > 0) out->push_back(',');
        Indent(depth + 2, out);
        AppendValue(message, r, field, e, depth + 2,
                    element_type ? &*element_type : nullptr, out);
      }
      if (size > 0) Indent(depth + 1, out);
      out->push_back(']');
    } else {
      AppendValue(message, r, field, 0, depth + 1, nullptr, out);
    }
  }
  if (!first) Indent(depth, out);
  out->push_back('}');
}

}  // namespace

std::string MessageToJson(const Message& message) {
  std::string out;
  AppendMessage(message,
                MessageType{message.GetDescriptor(), message.GetReflection()},
                0, &out);
  out.push_back('\n');
  return out;
}

}  // namespace trl

// Text that is not UTF-8 becomes a proto3 string that parses: the same
// rules as protobuf's own validator, checked against it.
#include "common/utf8.h"

#include <gtest/gtest.h>

#include "proto/trl_launch.pb.h"

namespace trl {
namespace {

namespace pb = trl::launch::v1;

// Whether protobuf takes `text` as a string field.
bool ProtobufParses(const std::string& text) {
  pb::FailureRecord record;
  record.set_reason(text);
  pb::FailureRecord parsed;
  return parsed.ParseFromString(record.SerializeAsString());
}

TEST(Utf8Test, ValidTextIsKept) {
  for (const std::string text :
       {"", "plain", "caf\xC3\xA9", "\xE2\x82\xAC 10", "\xF0\x9F\x98\x80",
        "\xF4\x8F\xBF\xBF", "\xED\x9F\xBF"}) {
    EXPECT_EQ(ToValidUtf8(text), text);
    EXPECT_TRUE(ProtobufParses(text));
  }
}

TEST(Utf8Test, EachBadByteBecomesAReplacementCharacter) {
  EXPECT_EQ(ToValidUtf8("caf\xE9!"), "caf\xEF\xBF\xBD!");          // Latin-1
  EXPECT_EQ(ToValidUtf8("\xFF\xFE"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // binary
  EXPECT_EQ(ToValidUtf8("a\xC3"), "a\xEF\xBF\xBD");  // cut in the middle
}

TEST(Utf8Test, WhatProtobufRefusesIsMadeValid) {
  // Overlong forms, surrogates, past U+10FFFF, stray continuation bytes,
  // truncated sequences, and the leads that never start one.
  for (const std::string bad :
       {"\xC0\xAF", "\xE0\x80\xAF", "\xF0\x80\x80\xAF", "\xED\xA0\x80",
        "\xF4\x90\x80\x80", "\x80", "\xBF\xBF", "\xE2\x82", "\xF0\x9F\x98",
        "\xF5\x80\x80\x80", "\xFF"}) {
    EXPECT_FALSE(ProtobufParses(bad)) << "not a bad case: " << bad.size();
    EXPECT_TRUE(ProtobufParses(ToValidUtf8(bad))) << bad.size();
  }
}

TEST(Utf8Test, EveryTwoByteStringComesOutValid) {
  for (int a = 0; a < 256; ++a) {
    for (int b = 0; b < 256; ++b) {
      const std::string text{static_cast<char>(a), static_cast<char>(b)};
      const std::string valid = ToValidUtf8(text);
      ASSERT_TRUE(ProtobufParses(valid)) << a << " " << b;
      if (ProtobufParses(text)) {
        ASSERT_EQ(valid, text) << a << " " << b;
      }
    }
  }
}

}  // namespace
}  // namespace trl

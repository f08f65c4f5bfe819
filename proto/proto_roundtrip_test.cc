// Round-trips every message of the wire contract: each field is set to a non-default value via
// reflection, serialized, parsed back and compared.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/util/message_differencer.h>

#include <memory>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "proto/falcon/v1/common.pb.h"
#include "proto/falcon/v1/control.pb.h"
#include "proto/falcon/v1/shim.pb.h"
#include "proto/falcon/v1/telemetry.pb.h"

namespace falcon::proto {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// Sets every field of `msg` (one member per oneof, chosen by `oneof_pick`) to a value that
// differs from the default, recursing into sub-messages up to `depth`.
void Fill(Message* msg, int depth, int oneof_pick) {
  const Descriptor* d = msg->GetDescriptor();
  const Reflection* r = msg->GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->real_containing_oneof() != nullptr) {
      const auto* oneof = f->real_containing_oneof();
      if (oneof->field(oneof_pick % oneof->field_count()) != f) continue;
    }
    const int n = f->is_repeated() ? 2 : 1;
    for (int k = 0; k < n; ++k) {
      const int v = 7 + i + k;
      switch (f->cpp_type()) {
#define FALCON_SET(CPPTYPE, SETTER, ADDER, VALUE) \
  case FieldDescriptor::CPPTYPE:                  \
    if (f->is_repeated()) {                       \
      r->ADDER(msg, f, VALUE);                    \
    } else {                                      \
      r->SETTER(msg, f, VALUE);                   \
    }                                             \
    break;
        FALCON_SET(CPPTYPE_INT32, SetInt32, AddInt32, -v)
        FALCON_SET(CPPTYPE_INT64, SetInt64, AddInt64, -(int64_t{1} << 40) - v)
        FALCON_SET(CPPTYPE_UINT32, SetUInt32, AddUInt32, 4000000000u - v)
        FALCON_SET(CPPTYPE_UINT64, SetUInt64, AddUInt64, ~uint64_t{0} - v)
        FALCON_SET(CPPTYPE_DOUBLE, SetDouble, AddDouble, 0.125 * v)
        FALCON_SET(CPPTYPE_FLOAT, SetFloat, AddFloat, 0.25f * v)
        FALCON_SET(CPPTYPE_BOOL, SetBool, AddBool, true)
        FALCON_SET(CPPTYPE_STRING, SetString, AddString, "s" + std::to_string(v))
#undef FALCON_SET
        case FieldDescriptor::CPPTYPE_ENUM: {
          const auto* e = f->enum_type();
          const auto* value = e->value(e->value_count() - 1);
          if (f->is_repeated()) {
            r->AddEnum(msg, f, value);
          } else {
            r->SetEnum(msg, f, value);
          }
          break;
        }
        case FieldDescriptor::CPPTYPE_MESSAGE: {
          if (depth <= 0) break;
          Message* sub = f->is_repeated() ? r->AddMessage(msg, f) : r->MutableMessage(msg, f);
          Fill(sub, depth - 1, oneof_pick);
          break;
        }
      }
    }
  }
}

void CollectMessages(const Descriptor* d, std::set<const Descriptor*>* out) {
  if (!out->insert(d).second) return;
  for (int i = 0; i < d->nested_type_count(); ++i) CollectMessages(d->nested_type(i), out);
}

std::set<const Descriptor*> AllMessages() {
  std::set<const Descriptor*> all;
  for (const auto* file :
       {v1::OpRecord::descriptor()->file(), v1::AgentMessage::descriptor()->file(),
        v1::ShimMessage::descriptor()->file(), v1::Event::descriptor()->file()}) {
    for (int i = 0; i < file->message_type_count(); ++i)
      CollectMessages(file->message_type(i), &all);
  }
  return all;
}

TEST(ProtoRoundTripTest, EveryMessageSurvivesSerialization) {
  const auto all = AllMessages();
  ASSERT_GE(all.size(), 60u);  // The contract has ~70 messages; guards against an empty walk.
  google::protobuf::DynamicMessageFactory factory;
  for (const Descriptor* d : all) {
    for (int pick = 0; pick < 6; ++pick) {  // exercise each member of oneofs with up to 6 members
      std::unique_ptr<Message> original(factory.GetPrototype(d)->New());
      Fill(original.get(), 3, pick);
      std::string wire;
      ASSERT_TRUE(original->SerializeToString(&wire)) << d->full_name();
      if (d->field_count() > 0) {
        EXPECT_FALSE(wire.empty()) << d->full_name();
      }
      std::unique_ptr<Message> parsed(factory.GetPrototype(d)->New());
      ASSERT_TRUE(parsed->ParseFromString(wire)) << d->full_name();
      EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*original, *parsed))
          << d->full_name() << " pick " << pick << "\n"
          << original->DebugString() << "\nvs\n"
          << parsed->DebugString();
    }
  }
}

TEST(ProtoRoundTripTest, DirectiveKeepsOneKindAndFullWidthIds) {
  v1::Directive directive;
  directive.set_directive_id(~uint64_t{0});
  directive.set_epoch(3);
  directive.set_effective_iteration(120);
  directive.mutable_micro_batch_plan()->add_micro_batches(6);
  directive.mutable_micro_batch_plan()->add_micro_batches(10);
  directive.mutable_pause()->set_max_duration_ns(5'000'000'000);  // replaces the oneof member
  EXPECT_EQ(directive.kind_case(), v1::Directive::kPause);
  v1::Directive parsed;
  ASSERT_TRUE(parsed.ParseFromString(directive.SerializeAsString()));
  EXPECT_EQ(parsed.directive_id(), ~uint64_t{0});
  EXPECT_EQ(parsed.kind_case(), v1::Directive::kPause);
  EXPECT_FALSE(parsed.has_micro_batch_plan());
}

TEST(ProtoRoundTripTest, OptionalSettingsDistinguishUnsetFromZero) {
  v1::Settings settings;
  settings.set_detection_enabled(false);
  v1::Settings parsed;
  ASSERT_TRUE(parsed.ParseFromString(settings.SerializeAsString()));
  EXPECT_TRUE(parsed.has_detection_enabled());
  EXPECT_FALSE(parsed.detection_enabled());
  EXPECT_FALSE(parsed.has_hazard());
}

TEST(ProtoRoundTripTest, CorruptBytesAreRejected) {
  v1::TelemetryBatch batch;
  batch.set_sequence(9);
  batch.add_iterations()->set_iteration_time_ns(123);
  std::string wire = batch.SerializeAsString();
  wire.resize(wire.size() - 1);  // truncated mid-field
  v1::TelemetryBatch parsed;
  EXPECT_FALSE(parsed.ParseFromString(wire));
}

}  // namespace
}  // namespace falcon::proto

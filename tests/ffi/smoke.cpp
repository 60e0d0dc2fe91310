// The C ABI from C++17 (g++ -Wall -Wextra -Werror): the header compiles as C++, and RAII
// wrappers of the kind an engine writes around it encode and decode an object, join a
// real relay, publish, receive, and leave.
//
// usage: smoke HTTP_BASE TOKEN_A TOKEN_B ROOM
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gsrelay.h"

namespace {

void check(gsr_status st, const char *what) {
    if (st != GSR_OK)
        throw std::runtime_error(std::string(what) + ": " + gsr_status_name(st) + ": " +
                                 gsr_last_error());
}

// A handle freed when it goes out of scope.
template <gsr_status (*Free)(uint64_t)>
class Handle {
  public:
    Handle() = default;
    Handle(const Handle &) = delete;
    Handle &operator=(const Handle &) = delete;
    ~Handle() {
        if (h_) Free(h_);
    }
    uint64_t *out() { return &h_; }
    uint64_t get() const { return h_; }

  private:
    uint64_t h_ = 0;
};

using Encoder = Handle<gsr_encoder_free>;
using Decoder = Handle<gsr_decoder_free>;
using Client = Handle<gsr_client_free>;

void join(Client &c, const char *base, const char *token, const char *room) {
    gsr_join_options o;
    check(gsr_join_options_init(&o), "options");
    o.http_base = base;
    o.token = token;
    o.room = room;
    check(gsr_client_join(&o, c.out()), "join");
}

std::vector<gsr_event> poll(const Client &c) {
    std::vector<gsr_event> events(64);
    size_t n = 0;
    check(gsr_client_poll(c.get(), events.data(), events.size(), sizeof(gsr_event), &n), "poll");
    events.resize(n);
    return events;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc != 5) {
        std::fprintf(stderr, "usage: smoke HTTP_BASE TOKEN_A TOKEN_B ROOM\n");
        return 2;
    }
    try {
        gsr_object head{};
        head.type = GSR_OBJECT_HEAD1;
        head.u.head1.id = 7;
        head.u.head1.location.x = 2.5f;

        Encoder enc;
        check(gsr_encoder_new(GSR_DIALECT_DRAFT01, enc.out()), "encoder");
        check(gsr_encode_object(enc.get(), &head), "encode");
        const uint8_t *data = nullptr;
        size_t len = 0;
        check(gsr_encoder_data(enc.get(), &data, &len), "data");
        Decoder dec;
        check(gsr_decoder_new(GSR_DIALECT_DRAFT01, dec.out()), "decoder");
        check(gsr_decoder_set_buffer(dec.get(), data, len), "buffer");
        gsr_object back{};
        check(gsr_decode_object(dec.get(), &back), "decode");
        if (back.type != GSR_OBJECT_HEAD1 || back.u.head1.location.x != 2.5f)
            throw std::runtime_error("decoded another object");

        Client a, b;
        join(a, argv[1], argv[2], argv[4]);
        join(b, argv[1], argv[3], argv[4]);
        uint32_t a_ssrc = 0;
        bool received = false;
        auto until = std::chrono::steady_clock::now() + std::chrono::seconds(15);
        while (!received && std::chrono::steady_clock::now() < until) {
            for (const auto &e : poll(a))
                if (e.kind == GSR_EVENT_JOINED) a_ssrc = e.ssrc;
            if (a_ssrc != 0) check(gsr_client_publish(a.get(), &head, 1), "publish");
            for (const auto &e : poll(b))
                received |= e.kind == GSR_EVENT_OBJECT && e.ssrc == a_ssrc &&
                            e.object.type == GSR_OBJECT_HEAD1 && e.object_id == 7;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        if (!received) throw std::runtime_error("B never received A's head");
        check(gsr_client_leave(a.get()), "leave");
        std::printf("C++: encoded, decoded, published and received\n");
        return 0;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
}

/* One object of every draft-01 type a dialect can carry, with distinct objectIDs from
 * `base`, for the tests that publish them. */
#ifndef GSRELAY_TEST_OBJECTS_H
#define GSRELAY_TEST_OBJECTS_H

#include <string.h>

#include "gsrelay.h"

static const gsr_vec3 TEST_VERTICES[3] = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}};
static const gsr_vec3 TEST_NORMALS[3] = {{0, 0, 1}, {0, 0, 1}, {0, 0, 1}};
static const gsr_texture_uv TEST_UVS[3] = {{0, 0, 0, 0}, {1, 0, 1, 0}, {0, 1, 0, 1}};
static const uint64_t TEST_TRIANGLES[3] = {0, 1, 2};
static const uint8_t TEST_UNKNOWN_BODY[4] = {0x2a, 1, 2, 3}; /* objectID 42, then bytes */

static gsr_loc2 test_loc2(float x) {
    gsr_loc2 l = {x, x + 1.0f, x + 2.0f, 0.5f, -0.5f, 0.25f};
    return l;
}

static gsr_rot2 test_rot2(void) {
    gsr_rot2 r = {0.5f, 0.25f, -0.125f, 0.0f, 0.0625f, 1.0f};
    return r;
}

/* Fills `out` (room for 16) with the objects of `dialect`; returns how many. */
static size_t test_objects(gsr_dialect dialect, uint64_t base, gsr_object *out) {
    size_t n = 0;
    memset(out, 0, 16 * sizeof *out);

    out[n].type = GSR_OBJECT_HEAD1;
    out[n].u.head1.id = base + 1;
    out[n].u.head1.time = 1234;
    out[n].u.head1.location = test_loc2(1.5f);
    out[n].u.head1.rotation = test_rot2();
    out[n].u.head1.ipd_present = 1;
    out[n].u.head1.ipd = 0.0625f;
    n++;

    out[n].type = GSR_OBJECT_HAND1;
    out[n].u.hand1.id = base + 2;
    out[n].u.hand1.time = 7;
    out[n].u.hand1.left = 1;
    out[n].u.hand1.location = test_loc2(-3.0f);
    out[n].u.hand1.rotation = test_rot2();
    n++;

    out[n].type = GSR_OBJECT_HAND2;
    out[n].u.hand2.id = base + 3;
    out[n].u.hand2.time = 9;
    out[n].u.hand2.location = test_loc2(4.0f);
    out[n].u.hand2.rotation = test_rot2();
    out[n].u.hand2.wrist.tx = 0.5f;
    out[n].u.hand2.thumb.tip.ty = 0.25f;
    out[n].u.hand2.index.dip.tz = -0.5f;
    out[n].u.hand2.pinky.cmc.tx = 1.0f;
    n++;

    out[n].type = GSR_OBJECT_OBJECT1;
    out[n].u.object1.id = base + 4;
    out[n].u.object1.time = 11;
    out[n].u.object1.position.x = 10.0f;
    out[n].u.object1.position.y = 20.0f;
    out[n].u.object1.position.z = 30.0f;
    out[n].u.object1.rotation.i = 0.5f;
    out[n].u.object1.active = 1;
    out[n].u.object1.parent_present = 1;
    out[n].u.object1.parent = base + 1;
    if (dialect == GSR_DIALECT_GSE) {
        out[n].u.object1.scale.x = 1.0f;
        out[n].u.object1.scale.y = 2.0f;
        out[n].u.object1.scale.z = 3.0f;
    } else {
        out[n].u.object1.scale_uniform = 1;
        out[n].u.object1.scale.x = 2.0f;
    }
    n++;

    out[n].type = GSR_OBJECT_MESH1;
    out[n].u.mesh1.id = base + 5;
    out[n].u.mesh1.num_vertices = 3;
    out[n].u.mesh1.vertices = TEST_VERTICES;
    out[n].u.mesh1.num_normals = 3;
    out[n].u.mesh1.normals = TEST_NORMALS;
    out[n].u.mesh1.num_textures = 3;
    out[n].u.mesh1.textures = TEST_UVS;
    out[n].u.mesh1.num_triangles = 3;
    out[n].u.mesh1.triangles = TEST_TRIANGLES;
    if (dialect == GSR_DIALECT_DRAFT01) {
        out[n].u.mesh1.texture_kind = GSR_TEXTURE_URL;
        out[n].u.mesh1.texture_url = "https://example.com/t.png";
    }
    n++;

    out[n].type = GSR_OBJECT_UNKNOWN;
    out[n].u.unknown_object.tag = 16384;
    out[n].u.unknown_object.data_length = sizeof TEST_UNKNOWN_BODY;
    out[n].u.unknown_object.data = TEST_UNKNOWN_BODY;
    n++;

    if (dialect == GSR_DIALECT_GSE) return n;

    out[n].type = GSR_OBJECT_OBJECT2;
    out[n].u.object2.id = base + 6;
    out[n].u.object2.time = 13;
    out[n].u.object2.location = test_loc2(5.0f);
    out[n].u.object2.rotation = test_rot2();
    out[n].u.object2.scale = test_loc2(1.0f);
    out[n].u.object2.active = 1;
    n++;

    out[n].type = GSR_OBJECT_MESH2;
    out[n].u.mesh2.id = base + 7;
    out[n].u.mesh2.location = test_loc2(6.0f);
    out[n].u.mesh2.rotation = test_rot2();
    out[n].u.mesh2.scale = test_loc2(1.0f);
    out[n].u.mesh2.mesh_url = "https://example.com/m.glb";
    out[n].u.mesh2.texture_kind = GSR_TEXTURE_RTP_PT;
    out[n].u.mesh2.texture_rtp_pt = 97;
    n++;

    out[n].type = GSR_OBJECT_GAME_CONTROL1;
    out[n].u.game_control1.id = base + 8;
    out[n].u.game_control1.time = 15;
    out[n].u.game_control1.buttons = 5;
    out[n].u.game_control1.buttons_time = 14;
    out[n].u.game_control1.left.x = 0.5f;
    out[n].u.game_control1.right.y = -0.5f;
    n++;

    out[n].type = GSR_OBJECT_THREE_DOF1;
    out[n].u.three_dof1.id = base + 9;
    out[n].u.three_dof1.time = 17;
    out[n].u.three_dof1.left = 1;
    out[n].u.three_dof1.rotation = test_rot2();
    n++;

    out[n].type = GSR_OBJECT_SIX_DOF1;
    out[n].u.six_dof1.id = base + 10;
    out[n].u.six_dof1.time = 19;
    out[n].u.six_dof1.location = test_loc2(7.0f);
    out[n].u.six_dof1.rotation = test_rot2();
    out[n].u.six_dof1.pointer_present = 1;
    out[n].u.six_dof1.pointer.x = 1.0f;
    out[n].u.six_dof1.pointer.y = 2.0f;
    out[n].u.six_dof1.pointer.z = 3.0f;
    n++;

    return n;
}

/* The objectID the relay keys an object of `test_objects` by. */
static uint64_t test_object_id(const gsr_object *o) {
    switch (o->type) {
    case GSR_OBJECT_HEAD1: return o->u.head1.id;
    case GSR_OBJECT_HAND1: return o->u.hand1.id;
    case GSR_OBJECT_HAND2: return o->u.hand2.id;
    case GSR_OBJECT_OBJECT1: return o->u.object1.id;
    case GSR_OBJECT_OBJECT2: return o->u.object2.id;
    case GSR_OBJECT_MESH1: return o->u.mesh1.id;
    case GSR_OBJECT_MESH2: return o->u.mesh2.id;
    case GSR_OBJECT_GAME_CONTROL1: return o->u.game_control1.id;
    case GSR_OBJECT_THREE_DOF1: return o->u.three_dof1.id;
    case GSR_OBJECT_SIX_DOF1: return o->u.six_dof1.id;
    case GSR_OBJECT_UNKNOWN: return 42;
    default: return 0;
    }
}

#endif

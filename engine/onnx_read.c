/* ModelProto -> stk_onnx_model (onnx_read.h), with the field numbers of
 * onnx.proto (IR version 3 and later). One pass per message over
 * common/pb_read's cursor; repeated messages are counted first so every
 * array is allocated once, from an arena the model owns with a copy of the
 * file's bytes (tensor data points into that copy). */
#include "engine/onnx_read.h"

#include "common/fs.h"
#include "common/pb_read.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the arena ------------------------------------------------------------ */

typedef struct stk_onnx_arena {
    struct block *blocks;
    uint8_t *bytes; /* the file */
} stk_onnx_arena;

struct block {
    struct block *next;
    max_align_t data[];
};

static void *arena_alloc(stk_onnx_arena *a, size_t n)
{
    struct block *b = malloc(sizeof *b + (n ? n : 1));
    if (!b) return NULL;
    b->next = a->blocks;
    a->blocks = b;
    return b->data;
}

static void *arena_calloc(stk_onnx_arena *a, size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size) return NULL;
    void *p = arena_alloc(a, count * size);
    if (p) memset(p, 0, count * size);
    return p;
}

/* ---- context: the file's name and the path of the field being read ------ */

typedef struct ctx {
    stk_onnx_arena *arena;
    const char *what;
    char where[160]; /* "graph.node[12] (/layer1/Conv)" */
} ctx;

static stk_status corrupt(const ctx *c, const char *why)
{
    return stk_error(STK_ERR_CORRUPT, "%s: %s%s%s", c->what, c->where, c->where[0] ? ": " : "",
                     why);
}

static stk_status malformed(const ctx *c, const stk_pb_reader *r)
{
    size_t at;
    const char *why = stk_pb_reader_error(r, &at);
    return stk_error(STK_ERR_CORRUPT, "%s: %s%snot valid protobuf (%s, at byte %zu of the message)",
                     c->what, c->where, c->where[0] ? ": " : "", why, at);
}

static stk_status nomem(const ctx *c)
{
    return stk_error(STK_ERR_NOMEM, "%s: out of memory reading the model", c->what);
}

static void set_where(ctx *c, const char *list, int i)
{
    snprintf(c->where, sizeof c->where, "graph.%s[%d]", list, i);
}

/* A NUL-terminated copy of a string field. */
static const char *str(ctx *c, const stk_pb_field *f)
{
    char *s = arena_alloc(c->arena, f->len + 1);
    if (!s) return NULL;
    if (f->len) memcpy(s, f->data, f->len);
    s[f->len] = 0;
    return s;
}

/* How many fields numbered `field` a message has (-1: malformed). */
static int count_fields(const uint8_t *data, size_t len, int field)
{
    stk_pb_reader r;
    stk_pb_reader_init(&r, data, len);
    stk_pb_field f;
    int n = 0, got;
    while ((got = stk_pb_next(&r, &f)) > 0)
        if (f.field == field) n++;
    return got < 0 ? -1 : n;
}

#define NEXT_FIELDS(r, f, got, data, len)                                                          \
    stk_pb_reader r;                                                                               \
    stk_pb_reader_init(&r, data, len);                                                             \
    stk_pb_field f;                                                                                \
    int got;                                                                                       \
    while ((got = stk_pb_next(&r, &f)) > 0)

/* ---- TensorProto ------------------------------------------------------------ */

size_t stk_onnx_dtype_size(int dtype)
{
    switch (dtype) {
    case STK_ONNX_FLOAT:
    case STK_ONNX_INT32: return 4;
    case STK_ONNX_UINT8:
    case STK_ONNX_INT8:
    case STK_ONNX_BOOL: return 1;
    case STK_ONNX_INT64:
    case STK_ONNX_DOUBLE: return 8;
    case STK_ONNX_FLOAT16:
    case STK_ONNX_BFLOAT16: return 2;
    }
    return 0;
}

/* Typed data given as varints (int32_data, int64_data): decoded into the
 * arena as little-endian values of the tensor's type. */
static stk_status typed_varints(ctx *c, stk_onnx_tensor *t, const stk_pb_field *f, size_t esize)
{
    int64_t n = stk_pb_packed_count(f, STK_PB_VARINT);
    if (n < 0) return corrupt(c, "its typed data is not valid protobuf");
    uint64_t *v = malloc(sizeof *v * (size_t)(n ? n : 1));
    uint8_t *out = arena_alloc(c->arena, (size_t)n * esize);
    size_t got;
    stk_status st = STK_OK;
    if (!v || !out) {
        st = nomem(c);
    } else if (!stk_pb_repeated(f, STK_PB_VARINT, v, (size_t)n, &got)) {
        st = corrupt(c, "its typed data is not valid protobuf");
    } else {
        for (size_t i = 0; i < got; i++) {
            if (esize == 8) {
                memcpy(out + 8 * i, &v[i], 8);
            } else if (esize == 4) {
                uint32_t x = (uint32_t)v[i];
                memcpy(out + 4 * i, &x, 4);
            } else if (esize == 2) {
                uint16_t x = (uint16_t)v[i];
                memcpy(out + 2 * i, &x, 2);
            } else {
                out[i] = (uint8_t)v[i];
            }
        }
        t->data = out;
        t->bytes = got * esize;
    }
    free(v);
    return st;
}

static stk_status read_tensor(ctx *c, const uint8_t *data, size_t len, stk_onnx_tensor *t)
{
    memset(t, 0, sizeof *t);
    t->name = "";
    const stk_pb_field *typed = NULL;
    stk_pb_field typed_f = {0}, raw_f = {0};
    bool have_raw = false, external = false;
    int typed_field = 0;
    NEXT_FIELDS(r, f, got, data, len)
    {
        switch (f.field) {
        case 1: { /* dims */
            uint64_t v[STK_ONNX_MAX_DIMS];
            size_t n;
            if (!stk_pb_repeated(&f, STK_PB_VARINT, v, STK_ONNX_MAX_DIMS - (size_t)t->ndim, &n))
                return stk_error(STK_ERR_UNSUPPORTED,
                                 "%s: %s: a tensor of more than %d dimensions (or damaged dims)",
                                 c->what, c->where, STK_ONNX_MAX_DIMS);
            for (size_t i = 0; i < n; i++) t->dims[t->ndim++] = (int64_t)v[i];
            break;
        }
        case 2: t->dtype = (int)f.v; break;
        case 4:  /* float_data */
        case 5:  /* int32_data (also int8/16, uint8/16, bool, float16 bits) */
        case 7:  /* int64_data */
        case 10: /* double_data */
            typed_f = f;
            typed = &typed_f;
            typed_field = f.field;
            break;
        case 8:
            if (f.wire != STK_PB_LEN || !(t->name = str(c, &f))) return nomem(c);
            break;
        case 9:
            if (f.wire != STK_PB_LEN) return corrupt(c, "raw_data is not bytes");
            raw_f = f;
            have_raw = true;
            break;
        case 14: external = f.v == 1; break; /* data_location EXTERNAL */
        }
    }
    if (got < 0) return malformed(c, &r);
    if (external)
        return stk_error(STK_ERR_UNSUPPORTED,
                         "%s: %s: tensor '%s' keeps its data in another file (ONNX external "
                         "data); save the model as one file (torch.onnx.export does for "
                         "models under 2 GB)",
                         c->what, c->where, t->name);
    int64_t numel = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (t->dims[i] < 0) return corrupt(c, "a tensor has a negative dimension");
        if (t->dims[i] && numel > INT64_MAX / 8 / t->dims[i])
            return corrupt(c, "a tensor's size overflows");
        numel *= t->dims[i];
    }
    t->numel = numel;
    size_t esize = stk_onnx_dtype_size(t->dtype);
    if (have_raw) {
        t->data = raw_f.data;
        t->bytes = raw_f.len;
    } else if (typed && esize) {
        if (typed_field == 4 || typed_field == 10) { /* fixed 32 / 64 bits, packed */
            size_t w = typed_field == 4 ? 4 : 8;
            if (typed->wire == STK_PB_LEN) {
                t->data = typed->data;
                t->bytes = typed->len;
            } else { /* one unpacked value */
                uint8_t *one = arena_alloc(c->arena, w);
                if (!one) return nomem(c);
                memcpy(one, &typed->v, w);
                t->data = one;
                t->bytes = w;
            }
            if (w != esize) return corrupt(c, "a tensor's typed data does not match its type");
        } else {
            STK_TRY(typed_varints(c, t, typed, esize));
        }
    } else if (numel == 0 || !esize) {
        t->data = NULL; /* empty, or a type kept only by name (strings) */
    } else if (!typed) {
        t->bytes = 0;
    }
    if (esize && (numel > 0 || t->bytes) && t->bytes != (size_t)numel * esize) {
        char why[160];
        snprintf(why, sizeof why,
                 "tensor '%.60s' has %lld elements of %zu bytes but %zu bytes of data", t->name,
                 (long long)numel, esize, t->bytes);
        return corrupt(c, why);
    }
    return STK_OK;
}

/* ---- AttributeProto ----------------------------------------------------------- */

static stk_status read_attr(ctx *c, const uint8_t *data, size_t len, stk_onnx_attr *a)
{
    memset(a, 0, sizeof *a);
    a->name = "";
    int n_floats = 0, n_ints = 0;
    /* first pass: the scalars and how many repeated values */
    {
        NEXT_FIELDS(r, f, got, data, len)
        {
            switch (f.field) {
            case 1:
                if (f.wire != STK_PB_LEN || !(a->name = str(c, &f))) return nomem(c);
                break;
            case 2: a->f = stk_pb_float_of(f.v); break;
            case 3: a->i = (int64_t)f.v; break;
            case 4:
                if (f.wire != STK_PB_LEN || !(a->s = str(c, &f))) return nomem(c);
                a->s_len = f.len;
                break;
            case 7: {
                int64_t k = stk_pb_packed_count(&f, STK_PB_I32);
                if (k < 0 || k > INT32_MAX - n_floats) return corrupt(c, "damaged floats");
                n_floats += (int)k;
                break;
            }
            case 8: {
                int64_t k = stk_pb_packed_count(&f, STK_PB_VARINT);
                if (k < 0 || k > INT32_MAX - n_ints) return corrupt(c, "damaged ints");
                n_ints += (int)k;
                break;
            }
            case 20: a->type = (int)f.v; break;
            }
        }
        if (got < 0) return malformed(c, &r);
    }
    float *fl = n_floats ? arena_calloc(c->arena, (size_t)n_floats, sizeof *fl) : NULL;
    int64_t *in = n_ints ? arena_calloc(c->arena, (size_t)n_ints, sizeof *in) : NULL;
    uint64_t *tmp = NULL;
    if ((n_floats && !fl) || (n_ints && !in)) return nomem(c);
    int nf = 0, ni = 0;
    NEXT_FIELDS(r, f, got, data, len)
    {
        if (f.field == 7 || f.field == 8) {
            int wire = f.field == 7 ? STK_PB_I32 : STK_PB_VARINT;
            size_t room = (size_t)(f.field == 7 ? n_floats - nf : n_ints - ni), n;
            free(tmp);
            if (!(tmp = malloc(sizeof *tmp * (room ? room : 1)))) return nomem(c);
            if (!stk_pb_repeated(&f, wire, tmp, room, &n)) {
                free(tmp);
                return corrupt(c, "damaged repeated values");
            }
            for (size_t k = 0; k < n; k++) {
                if (f.field == 7)
                    fl[nf++] = stk_pb_float_of(tmp[k]);
                else
                    in[ni++] = (int64_t)tmp[k];
            }
        } else if (f.field == 5 && f.wire == STK_PB_LEN) {
            stk_onnx_tensor *t = arena_alloc(c->arena, sizeof *t);
            if (!t) {
                free(tmp);
                return nomem(c);
            }
            stk_status st = read_tensor(c, f.data, f.len, t);
            if (st != STK_OK) {
                free(tmp);
                return st;
            }
            a->t = t;
        }
    }
    free(tmp);
    if (got < 0) return malformed(c, &r);
    a->floats = fl, a->ints = in;
    a->n = a->type == STK_ONNX_ATTR_FLOATS ? nf : ni;
    if (!a->type) { /* IR < 3 wrote no type: infer it from what is set */
        a->type = a->t   ? STK_ONNX_ATTR_TENSOR
                  : a->s ? STK_ONNX_ATTR_STRING
                  : ni   ? STK_ONNX_ATTR_INTS
                  : nf   ? STK_ONNX_ATTR_FLOATS
                         : STK_ONNX_ATTR_INT;
        a->n = a->type == STK_ONNX_ATTR_FLOATS ? nf : ni;
    }
    if (a->type == STK_ONNX_ATTR_TENSOR && !a->t) return corrupt(c, "a tensor attribute has none");
    return STK_OK;
}

/* ---- StringStringEntryProto (metadata_props) ------------------------------------- */

static stk_status read_entry(ctx *c, const uint8_t *data, size_t len, const char **key,
                             const char **value)
{
    *key = *value = NULL;
    NEXT_FIELDS(r, f, got, data, len)
    {
        if (f.wire != STK_PB_LEN || (f.field != 1 && f.field != 2)) continue;
        const char *s = str(c, &f);
        if (!s) return nomem(c);
        *(f.field == 1 ? key : value) = s;
    }
    if (got < 0) return malformed(c, &r);
    return STK_OK;
}

/* ---- NodeProto ------------------------------------------------------------------ */

static stk_status read_node(ctx *c, const uint8_t *data, size_t len, stk_onnx_node *n)
{
    memset(n, 0, sizeof *n);
    n->name = n->op_type = n->domain = n->scopes = "";
    int ni = count_fields(data, len, 1), no = count_fields(data, len, 2),
        na = count_fields(data, len, 5);
    if (ni < 0 || no < 0 || na < 0) return corrupt(c, "the node is not valid protobuf");
    const char **in = arena_calloc(c->arena, (size_t)ni + 1, sizeof *in),
               **out = arena_calloc(c->arena, (size_t)no + 1, sizeof *out);
    stk_onnx_attr *at = arena_calloc(c->arena, (size_t)na + 1, sizeof *at);
    if (!in || !out || !at) return nomem(c);
    NEXT_FIELDS(r, f, got, data, len)
    {
        if (f.wire != STK_PB_LEN) continue;
        const char **slot = f.field == 1   ? &in[n->n_inputs++]
                            : f.field == 2 ? &out[n->n_outputs++]
                            : f.field == 3 ? &n->name
                            : f.field == 4 ? &n->op_type
                            : f.field == 7 ? &n->domain
                                           : NULL;
        if (slot && !(*slot = str(c, &f))) return nomem(c);
    }
    if (got < 0) return malformed(c, &r);
    for (int i = 0; i < n->n_inputs; i++)
        if (!in[i]) in[i] = "";
    NEXT_FIELDS(r2, f2, got2, data, len)
    {
        if (f2.field == 9 && f2.wire == STK_PB_LEN) { /* metadata_props: the module path */
            const char *key, *value;
            STK_TRY(read_entry(c, f2.data, f2.len, &key, &value));
            if (key && value && !strcmp(key, "pkg.torch.onnx.name_scopes")) n->scopes = value;
            continue;
        }
        if (f2.field != 5) continue;
        if (f2.wire != STK_PB_LEN) return corrupt(c, "an attribute is not a message");
        STK_TRY(read_attr(c, f2.data, f2.len, &at[n->n_attrs]));
        n->n_attrs++;
    }
    if (got2 < 0) return malformed(c, &r2);
    n->inputs = in, n->outputs = out, n->attrs = at;
    if (!n->op_type[0]) return corrupt(c, "a node without an op_type");
    return STK_OK;
}

/* ---- ValueInfoProto ---------------------------------------------------------------- */

static stk_status read_shape(ctx *c, const uint8_t *data, size_t len, stk_onnx_value *v)
{
    v->ndim = 0;
    NEXT_FIELDS(r, f, got, data, len)
    {
        if (f.field != 1 || f.wire != STK_PB_LEN) continue;
        if (v->ndim >= STK_ONNX_MAX_DIMS)
            return stk_error(STK_ERR_UNSUPPORTED, "%s: %s: more than %d dimensions", c->what,
                             c->where, STK_ONNX_MAX_DIMS);
        int d = v->ndim++;
        v->dims[d] = -1;
        NEXT_FIELDS(rd, fd, gotd, f.data, f.len)
        {
            if (fd.field == 1 && fd.wire == STK_PB_VARINT) v->dims[d] = (int64_t)fd.v;
            if (fd.field == 2 && fd.wire == STK_PB_LEN && !(v->dim_param[d] = str(c, &fd)))
                return nomem(c);
        }
        if (gotd < 0) return malformed(c, &rd);
        if (v->dims[d] < -1) return corrupt(c, "a negative dimension");
    }
    return got < 0 ? malformed(c, &r) : STK_OK;
}

static stk_status read_value(ctx *c, const uint8_t *data, size_t len, stk_onnx_value *v)
{
    memset(v, 0, sizeof *v);
    v->name = "";
    v->ndim = -1;
    NEXT_FIELDS(r, f, got, data, len)
    {
        if (f.wire != STK_PB_LEN) continue;
        if (f.field == 1 && !(v->name = str(c, &f))) return nomem(c);
        if (f.field != 2) continue;
        NEXT_FIELDS(rt, ft, gott, f.data, f.len) /* TypeProto */
        {
            if (ft.field != 1 || ft.wire != STK_PB_LEN) continue; /* tensor_type */
            NEXT_FIELDS(rs, fs, gots, ft.data, ft.len)
            {
                if (fs.field == 1 && fs.wire == STK_PB_VARINT) v->elem_type = (int)fs.v;
                if (fs.field == 2 && fs.wire == STK_PB_LEN)
                    STK_TRY(read_shape(c, fs.data, fs.len, v));
            }
            if (gots < 0) return malformed(c, &rs);
        }
        if (gott < 0) return malformed(c, &rt);
    }
    return got < 0 ? malformed(c, &r) : STK_OK;
}

/* ---- GraphProto and ModelProto -------------------------------------------------------- */

static stk_status read_graph(ctx *c, const uint8_t *data, size_t len, stk_onnx_model *m)
{
    int nn = count_fields(data, len, 1), ni = count_fields(data, len, 5),
        nin = count_fields(data, len, 11), nout = count_fields(data, len, 12);
    if (nn < 0 || ni < 0 || nin < 0 || nout < 0)
        return corrupt(c, "the graph is not valid protobuf");
    stk_onnx_node *nodes = arena_calloc(c->arena, (size_t)nn + 1, sizeof *nodes);
    stk_onnx_tensor *inits = arena_calloc(c->arena, (size_t)ni + 1, sizeof *inits);
    stk_onnx_value *ins = arena_calloc(c->arena, (size_t)nin + 1, sizeof *ins),
                   *outs = arena_calloc(c->arena, (size_t)nout + 1, sizeof *outs);
    if (!nodes || !inits || !ins || !outs) return nomem(c);
    m->nodes = nodes, m->initializers = inits, m->inputs = ins, m->outputs = outs;
    NEXT_FIELDS(r, f, got, data, len)
    {
        if (f.field == 2 && f.wire == STK_PB_LEN) {
            if (!(m->graph_name = str(c, &f))) return nomem(c);
            continue;
        }
        if (f.field == 16 && f.wire == STK_PB_LEN) { /* metadata_props: torch.export's signature */
            const char *key, *value;
            STK_TRY(read_entry(c, f.data, f.len, &key, &value));
            if (key && value && !strcmp(key, "pkg.torch.export.ExportedProgram.graph_signature"))
                m->torch_signature = value;
            continue;
        }
        if (f.field != 1 && f.field != 5 && f.field != 11 && f.field != 12) continue;
        if (f.wire != STK_PB_LEN) return corrupt(c, "a graph entry is not a message");
        if (f.field == 1) {
            set_where(c, "node", m->n_nodes);
            STK_TRY(read_node(c, f.data, f.len, &nodes[m->n_nodes]));
            m->n_nodes++;
        } else if (f.field == 5) {
            set_where(c, "initializer", m->n_initializers);
            STK_TRY(read_tensor(c, f.data, f.len, &inits[m->n_initializers]));
            m->n_initializers++;
        } else {
            bool in = f.field == 11;
            set_where(c, in ? "input" : "output", in ? m->n_inputs : m->n_outputs);
            STK_TRY(read_value(c, f.data, f.len, in ? &ins[m->n_inputs++] : &outs[m->n_outputs++]));
        }
    }
    c->where[0] = 0;
    if (got < 0) return malformed(c, &r);
    return STK_OK;
}

static stk_status read_model(ctx *c, const uint8_t *data, size_t len, stk_onnx_model *m)
{
    bool have_ir = false;
    const uint8_t *graph = NULL;
    size_t graph_len = 0;
    NEXT_FIELDS(r, f, got, data, len)
    {
        switch (f.field) {
        case 1:
            m->ir_version = (int64_t)f.v;
            have_ir = f.wire == STK_PB_VARINT;
            break;
        case 2:
        case 3:
            if (f.wire == STK_PB_LEN) {
                const char *s = str(c, &f);
                if (!s) return nomem(c);
                *(f.field == 2 ? &m->producer : &m->producer_version) = s;
            }
            break;
        case 7:
            if (f.wire != STK_PB_LEN)
                return corrupt(c, "not an ONNX model (its graph is not a message)");
            graph = f.data, graph_len = f.len;
            break;
        case 8: { /* opset_import */
            if (f.wire != STK_PB_LEN)
                return corrupt(c, "not an ONNX model (a damaged opset_import)");
            const char *domain = "";
            int64_t version = 0;
            NEXT_FIELDS(ro, fo, goto_, f.data, f.len)
            {
                if (fo.field == 1 && fo.wire == STK_PB_LEN && !(domain = str(c, &fo)))
                    return nomem(c);
                if (fo.field == 2 && fo.wire == STK_PB_VARINT) version = (int64_t)fo.v;
            }
            if (goto_ < 0) return malformed(c, &ro);
            if (!domain[0] || !strcmp(domain, "ai.onnx")) m->opset = version;
            break;
        }
        }
    }
    if (got < 0 || !graph || !have_ir || m->ir_version < 1 || m->ir_version > 100)
        return stk_error(STK_ERR_CORRUPT,
                         "%s: not an ONNX model (no ModelProto with an IR version and a graph: "
                         "the file is another format, cut off or damaged)",
                         c->what);
    if (!m->producer) m->producer = "";
    if (!m->producer_version) m->producer_version = "";
    if (!m->graph_name) m->graph_name = "";
    return read_graph(c, graph, graph_len, m);
}

/* Parse `bytes` (malloc'd, len of them), which the model then owns: freed
 * with it, or here on failure. */
static stk_status read_owned(uint8_t *bytes, size_t len, const char *what, stk_onnx_model **out)
{
    *out = NULL;
    stk_onnx_arena *a = calloc(1, sizeof *a);
    stk_onnx_model *m = calloc(1, sizeof *m);
    if (!a || !m) {
        free(bytes);
        free(a);
        free(m);
        return stk_error(STK_ERR_NOMEM, "%s: out of memory", what);
    }
    a->bytes = bytes;
    m->arena = a;
    m->bytes = bytes;
    m->n_bytes = len;
    ctx c = {.arena = a, .what = what};
    c.where[0] = 0;
    stk_status st = read_model(&c, bytes, len, m);
    if (st != STK_OK) {
        stk_onnx_model_destroy(m);
        return st;
    }
    *out = m;
    return STK_OK;
}

stk_status stk_onnx_read(const void *bytes, size_t len, const char *what, stk_onnx_model **out)
{
    *out = NULL;
    uint8_t *copy = malloc(len ? len : 1);
    if (!copy) return stk_error(STK_ERR_NOMEM, "%s: out of memory for %zu bytes", what, len);
    if (len) memcpy(copy, bytes, len);
    return read_owned(copy, len, what, out);
}

/* The file's bytes become the model's (no second copy of a model's
 * weights while it is read). */
stk_status stk_onnx_read_file(const char *path, stk_onnx_model **out)
{
    *out = NULL;
    uint8_t *data;
    size_t len;
    stk_status rd = stk_file_read_all(path, (uint64_t)4 << 30, &data, &len);
    if (rd != STK_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s", stk_last_error());
        return stk_error(rd, "%s: %s", path, why);
    }
    return read_owned(data, len, path, out);
}

void stk_onnx_model_destroy(stk_onnx_model *m)
{
    if (!m) return;
    if (m->arena) {
        struct block *b = m->arena->blocks;
        while (b) {
            struct block *next = b->next;
            free(b);
            b = next;
        }
        free(m->arena->bytes);
        free(m->arena);
    }
    free(m);
}

const stk_onnx_tensor *stk_onnx_initializer(const stk_onnx_model *m, const char *name)
{
    for (int i = 0; i < m->n_initializers; i++)
        if (!strcmp(m->initializers[i].name, name)) return &m->initializers[i];
    return NULL;
}

const stk_onnx_attr *stk_onnx_node_attr(const stk_onnx_node *n, const char *name)
{
    for (int i = 0; i < n->n_attrs; i++)
        if (!strcmp(n->attrs[i].name, name)) return &n->attrs[i];
    return NULL;
}

--
-- PostgreSQL database dump
--

\restrict LdQaAcppJKDd3N1CnsLKA0e2S63GAtNddegpiM8GAA8xel4yvAkwync3Q49uDZg

-- Dumped from database version 15.18 (Debian 15.18-0+deb12u1)
-- Dumped by pg_dump version 15.18 (Debian 15.18-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: billing; Type: SCHEMA; Schema: -; Owner: eddy
--

CREATE SCHEMA billing;


ALTER SCHEMA billing OWNER TO eddy;

--
-- Name: inventory; Type: SCHEMA; Schema: -; Owner: eddy
--

CREATE SCHEMA inventory;


ALTER SCHEMA inventory OWNER TO eddy;

--
-- Name: SCHEMA inventory; Type: COMMENT; Schema: -; Owner: eddy
--

COMMENT ON SCHEMA inventory IS 'stock and suppliers';


--
-- Name: invoice_no; Type: SEQUENCE; Schema: billing; Owner: eddy
--

CREATE SEQUENCE billing.invoice_no
    START WITH 1000
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER TABLE billing.invoice_no OWNER TO eddy;

SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: invoices; Type: TABLE; Schema: billing; Owner: eddy
--

CREATE TABLE billing.invoices (
    no integer NOT NULL,
    part_id bigint,
    amount numeric(10,2)
);


ALTER TABLE billing.invoices OWNER TO eddy;

--
-- Name: parts; Type: TABLE; Schema: inventory; Owner: eddy
--

CREATE TABLE inventory.parts (
    id bigint NOT NULL,
    supplier_id integer NOT NULL,
    label text NOT NULL,
    qty integer DEFAULT 0 NOT NULL,
    CONSTRAINT parts_qty_check CHECK ((qty >= 0))
);


ALTER TABLE inventory.parts OWNER TO eddy;

--
-- Name: part_totals; Type: VIEW; Schema: billing; Owner: eddy
--

CREATE VIEW billing.part_totals AS
 SELECT p.label,
    sum(i.amount) AS total
   FROM (billing.invoices i
     JOIN inventory.parts p ON ((p.id = i.part_id)))
  GROUP BY p.label;


ALTER TABLE billing.part_totals OWNER TO eddy;

--
-- Name: parts_id_seq; Type: SEQUENCE; Schema: inventory; Owner: eddy
--

ALTER TABLE inventory.parts ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME inventory.parts_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: suppliers; Type: TABLE; Schema: inventory; Owner: eddy
--

CREATE TABLE inventory.suppliers (
    id integer NOT NULL,
    name text NOT NULL
);


ALTER TABLE inventory.suppliers OWNER TO eddy;

--
-- Name: suppliers_id_seq; Type: SEQUENCE; Schema: inventory; Owner: eddy
--

CREATE SEQUENCE inventory.suppliers_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER TABLE inventory.suppliers_id_seq OWNER TO eddy;

--
-- Name: suppliers_id_seq; Type: SEQUENCE OWNED BY; Schema: inventory; Owner: eddy
--

ALTER SEQUENCE inventory.suppliers_id_seq OWNED BY inventory.suppliers.id;


--
-- Name: notes; Type: TABLE; Schema: public; Owner: eddy
--

CREATE TABLE public.notes (
    id integer NOT NULL,
    body text
);


ALTER TABLE public.notes OWNER TO eddy;

--
-- Name: suppliers id; Type: DEFAULT; Schema: inventory; Owner: eddy
--

ALTER TABLE ONLY inventory.suppliers ALTER COLUMN id SET DEFAULT nextval('inventory.suppliers_id_seq'::regclass);


--
-- Data for Name: invoices; Type: TABLE DATA; Schema: billing; Owner: eddy
--

COPY billing.invoices (no, part_id, amount) FROM stdin;
1000	1	12.50
1001	1	7.25
1002	3	99.00
\.


--
-- Data for Name: parts; Type: TABLE DATA; Schema: inventory; Owner: eddy
--

COPY inventory.parts (id, supplier_id, label, qty) FROM stdin;
1	1	bolt	10
2	1	nut	25
3	2	gear	3
\.


--
-- Data for Name: suppliers; Type: TABLE DATA; Schema: inventory; Owner: eddy
--

COPY inventory.suppliers (id, name) FROM stdin;
1	Acme
2	Globex
\.


--
-- Data for Name: notes; Type: TABLE DATA; Schema: public; Owner: eddy
--

COPY public.notes (id, body) FROM stdin;
1	kept in public
\.


--
-- Name: invoice_no; Type: SEQUENCE SET; Schema: billing; Owner: eddy
--

SELECT pg_catalog.setval('billing.invoice_no', 1002, true);


--
-- Name: parts_id_seq; Type: SEQUENCE SET; Schema: inventory; Owner: eddy
--

SELECT pg_catalog.setval('inventory.parts_id_seq', 3, true);


--
-- Name: suppliers_id_seq; Type: SEQUENCE SET; Schema: inventory; Owner: eddy
--

SELECT pg_catalog.setval('inventory.suppliers_id_seq', 2, true);


--
-- Name: invoices invoices_pkey; Type: CONSTRAINT; Schema: billing; Owner: eddy
--

ALTER TABLE ONLY billing.invoices
    ADD CONSTRAINT invoices_pkey PRIMARY KEY (no);


--
-- Name: parts parts_pkey; Type: CONSTRAINT; Schema: inventory; Owner: eddy
--

ALTER TABLE ONLY inventory.parts
    ADD CONSTRAINT parts_pkey PRIMARY KEY (id);


--
-- Name: suppliers suppliers_name_key; Type: CONSTRAINT; Schema: inventory; Owner: eddy
--

ALTER TABLE ONLY inventory.suppliers
    ADD CONSTRAINT suppliers_name_key UNIQUE (name);


--
-- Name: suppliers suppliers_pkey; Type: CONSTRAINT; Schema: inventory; Owner: eddy
--

ALTER TABLE ONLY inventory.suppliers
    ADD CONSTRAINT suppliers_pkey PRIMARY KEY (id);


--
-- Name: notes notes_pkey; Type: CONSTRAINT; Schema: public; Owner: eddy
--

ALTER TABLE ONLY public.notes
    ADD CONSTRAINT notes_pkey PRIMARY KEY (id);


--
-- Name: parts_label_idx; Type: INDEX; Schema: inventory; Owner: eddy
--

CREATE INDEX parts_label_idx ON inventory.parts USING btree (label);


--
-- Name: invoices invoices_part_id_fkey; Type: FK CONSTRAINT; Schema: billing; Owner: eddy
--

ALTER TABLE ONLY billing.invoices
    ADD CONSTRAINT invoices_part_id_fkey FOREIGN KEY (part_id) REFERENCES inventory.parts(id);


--
-- Name: parts parts_supplier_id_fkey; Type: FK CONSTRAINT; Schema: inventory; Owner: eddy
--

ALTER TABLE ONLY inventory.parts
    ADD CONSTRAINT parts_supplier_id_fkey FOREIGN KEY (supplier_id) REFERENCES inventory.suppliers(id) ON DELETE CASCADE;


--
-- PostgreSQL database dump complete
--

\unrestrict LdQaAcppJKDd3N1CnsLKA0e2S63GAtNddegpiM8GAA8xel4yvAkwync3Q49uDZg

